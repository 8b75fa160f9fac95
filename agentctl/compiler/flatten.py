"""Sub-workflow flattening (docs/workflow-language.md, docs/compiler.md): invocations become
ordinary tasks.

An invocation ``I`` of definition ``N@V`` becomes an input boundary ``I--inputs-<8 hex>``,
the definition's tasks as ``I--<local id>`` and an output aggregate that keeps the id ``I``.
Strings inside the children are rewritten so ``inputs.``, ``memory.`` and ``tasks.<local>.``
mean the invocation's input, its private memory prefix and its own tasks.

Deliberate difference from upstream (docs/compiler.md): upstream rewrites those substrings anywhere
in the text, so ``"see inputs.txt"`` changes; we rewrite template expressions only. A bare
``when``/``while`` (no ``${{ }}``) is a condition too, so it is rewritten as one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentctl.compiler import templating
from agentctl.compiler.drafts import Draft, Reporter, draft_from_json, join_path, sub_path
from agentctl.compiler.naming import (
    subworkflow_child_id,
    subworkflow_input_id,
    subworkflow_prefix,
)
from agentctl.compiler.schemas import SchemaChecker
from agentctl.compiler.task_parts import TaskUses
from agentctl.spec.models_common import Retry

__all__ = ["flatten_tasks"]

_INVOCATION_FIELDS = frozenset({"id", "uses", "needs", "with", "failure", "retry"})
_NO_RETRY = Retry().model_dump()
_KEY_KINDS = frozenset(
    {"builtin.memory.read", "builtin.memory.write", "builtin.long_term_memory.promote"}
)
_NAMESPACE_KINDS = frozenset(
    {
        "builtin.long_term_memory.read",
        "builtin.long_term_memory.search",
        "builtin.long_term_memory.write",
    }
)


class _Flattener:
    def __init__(self, spec: Mapping[str, Any], reporter: Reporter, schemas: SchemaChecker) -> None:
        self.subworkflows: Mapping[str, Any] = spec.get("subworkflows") or {}
        self.actions: Mapping[str, Any] = spec.get("actions") or {}
        self.reporter = reporter
        self.schemas = schemas
        self.out: list[Draft] = []
        self.checked: dict[str, bool] = {}

    def add(self, draft: Draft, stack: list[str]) -> None:
        if not draft.uses.startswith("workflow:"):
            self.out.append(draft)
            return
        name = draft.uses[len("workflow:") :]
        definition = self.subworkflows.get(name)
        uses_path = join_path(draft.path, "uses")
        if definition is None:
            self.reporter.error(
                "missing_reference",
                f"task `{draft.id}` invokes unknown sub-workflow `{name}`",
                uses_path,
                help="define it under spec.subworkflows or fix the name after `workflow:`",
            )
            return
        if name in stack:
            cycle = " -> ".join([*stack[stack.index(name) :], name])
            self.reporter.error(
                "dependency_cycle",
                f"sub-workflow cycle: {cycle}",
                uses_path,
                help="a sub-workflow may not invoke itself, directly or through another one",
            )
            return
        if not self._definition_ok(name, definition):
            return
        if not self._invocation_ok(draft):
            return
        self._expand(draft, name, definition, stack)

    def _definition_ok(self, name: str, definition: Mapping[str, Any]) -> bool:
        if name not in self.checked:
            base = join_path("spec.subworkflows", name)
            ok = True
            for field in ("inputSchema", "outputSchema"):
                ok &= self.schemas.check(
                    definition.get(field), join_path(base, field), f"sub-workflow `{name}` {field}"
                )
            self.checked[name] = ok
        return self.checked[name]

    def _invocation_ok(self, draft: Draft) -> bool:
        extra = [
            field
            for field, value in draft.definition_json().items()
            if field not in _INVOCATION_FIELDS and value is not None
        ]
        # A retry that only restates the defaults of the spec's Retry model is no retry.
        if draft.retry and Retry.model_validate(draft.retry).model_dump() != _NO_RETRY:
            extra.append("retry")
        if extra:
            self.reporter.error(
                "schema_violation",
                f"sub-workflow invocation `{draft.id}` accepts only id, uses, needs, with and "
                f"failure; it also sets {', '.join(sorted(extra))}",
                draft.path,
                help="move those settings onto the tasks inside the sub-workflow definition",
            )
            return False
        return True

    def _expand(
        self, call: Draft, name: str, definition: Mapping[str, Any], stack: list[str]
    ) -> None:
        version = str(definition.get("version", ""))
        input_id = subworkflow_input_id(call.id, name, version)
        prefix = subworkflow_prefix(call.id)
        tasks: list[Mapping[str, Any]] = list(definition.get("tasks") or ())
        local_ids = {str(t["id"]): subworkflow_child_id(call.id, str(t["id"])) for t in tasks}
        base = join_path("spec.subworkflows", name)
        if input_id in local_ids.values():
            self.reporter.error(
                "duplicate_task",
                f"sub-workflow `{name}` produces the reserved task id `{input_id}`",
                join_path(base, "tasks"),
                help="rename the task inside the definition so it does not end in `inputs-…`",
            )
            return

        def rewrite(value: Any, condition: bool = False) -> Any:
            return templating.rewrite_subworkflow(
                value,
                inputs_to=input_id,
                memory_prefix=prefix,
                task_ids=local_ids,
                condition=condition,
            )

        boundary_input = {**(definition.get("inputs") or {}), **call.with_}
        self.out.append(
            Draft(
                id=input_id,
                path=call.path,
                uses=call.uses,
                needs=list(call.needs),
                with_=boundary_input,
                vars={},
                failure=call.failure,
                output_schema=definition.get("inputSchema"),
                synthetic=TaskUses("subworkflow_input", {"name": name, "version": version}),
                with_path=join_path(call.path, "with"),
            )
        )
        stack.append(name)
        for index, task in enumerate(tasks):
            child_path = join_path(join_path(base, "tasks"), index)
            child = draft_from_json(task, child_path)
            self._rewrite_child(child, input_id, local_ids, prefix, rewrite)
            self.add(child, stack)
        stack.pop()
        children = [local_ids[str(t["id"])] for t in tasks]
        self.out.append(
            Draft(
                id=call.id,
                path=call.path,
                uses=call.uses,
                needs=[*children, input_id],
                with_=rewrite(dict(definition.get("outputs") or {})),
                vars={},
                failure=call.failure,
                output_schema=definition.get("outputSchema"),
                synthetic=TaskUses(
                    "subworkflow_aggregate",
                    {"name": name, "version": version, "children": children},
                ),
                source_needs=tuple(call.needs),
                guard_targets=(input_id,),
                with_path=join_path(base, "outputs"),
            )
        )

    def _rewrite_child(
        self,
        child: Draft,
        input_id: str,
        local_ids: Mapping[str, str],
        prefix: str,
        rewrite: Callable[..., Any],
    ) -> None:
        child.id = local_ids[child.id]
        child.needs = [local_ids.get(need, need) for need in child.needs]
        if input_id not in child.needs:
            child.needs.append(input_id)
        if child.when is not None:
            child.when = rewrite(child.when, condition=True)
        child.vars = rewrite(child.vars)
        child.with_ = self._isolate(child, child.uses, rewrite(child.with_), prefix, ("with",))
        if child.compensate is not None:
            compensate = dict(child.compensate)
            compensate["with"] = self._isolate(
                child,
                str(compensate.get("uses", "")),
                rewrite(compensate.get("with") or {}),
                prefix,
                ("compensate", "with"),
            )
            child.compensate = compensate
        if child.memory_writes is not None:
            child.memory_writes = [prefix + key for key in child.memory_writes]
        if child.foreach is not None:
            child.foreach = {**child.foreach, "items": rewrite(child.foreach.get("items", []))}
        if child.matrix is not None:
            child.matrix = {**child.matrix, "axes": rewrite(child.matrix.get("axes", {}))}
        if child.route is not None:
            route = dict(child.route)
            route["select"] = rewrite(route.get("select", ""))
            route["cases"] = [
                {**case, "tasks": [local_ids.get(t, t) for t in case.get("tasks", ())]}
                for case in route.get("cases", ())
            ]
            route["default"] = [local_ids.get(t, t) for t in route.get("default", ())]
            child.route = route
        if child.loop is not None:
            loop = dict(child.loop)
            loop["while"] = rewrite(loop.get("while", ""), condition=True)
            loop["initial"] = rewrite(loop.get("initial"))
            child.loop = loop

    def _isolate(
        self,
        child: Draft,
        uses: str,
        values: Mapping[str, Any],
        prefix: str,
        where: tuple[str, ...],
    ) -> Mapping[str, Any]:
        """Prefix a child's own memory ``key`` / long-term ``namespace`` (state isolation)."""
        if not uses.startswith("action:"):
            return values
        action = self.actions.get(uses[len("action:") :])
        if action is None:
            return values
        kind = action.get("kind")
        field = "key" if kind in _KEY_KINDS else "namespace" if kind in _NAMESPACE_KINDS else None
        if field is None or not isinstance(values.get(field), str):
            return values
        value: str = values[field]
        if templating.has_template(value):
            self.reporter.error(
                "unsupported_capability",
                f"sub-workflow task `{child.id}` needs a literal `{field}` so its state can be "
                "isolated per invocation",
                sub_path(child.path, *where, field),
                help=f"write `{field}` as a literal string inside the sub-workflow definition",
            )
            return values
        return {**values, field: prefix + value}


def flatten_tasks(
    spec: Mapping[str, Any], reporter: Reporter, schemas: SchemaChecker
) -> list[Draft]:
    """The top-level tasks with every sub-workflow invocation flattened, in document order."""
    flattener = _Flattener(spec, reporter, schemas)
    for index, task in enumerate(spec.get("tasks") or ()):
        flattener.add(draft_from_json(task, join_path("spec.tasks", index)), [])
    return flattener.out
