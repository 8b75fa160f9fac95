"""Graph-level static checks (docs/templates.md, docs/workflow-language.md, docs/compiler.md step
4): needs, templates,
output schemas and routers (which also attach route guards).

Values shared by expanded children are checked once per distinct (value, needs) pair, and
each finding is reported once per document location, so a mistake in a 1,000-item
``foreach`` yields one diagnostic, not a thousand.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from agentctl.compiler import templating
from agentctl.compiler.drafts import Reporter, sub_path
from agentctl.compiler.resolve import Node
from agentctl.compiler.schemas import SchemaChecker

__all__ = ["GraphChecker"]

_AGGREGATE_KINDS = frozenset({"aggregate", "loop_aggregate", "subworkflow_aggregate"})


class GraphChecker:
    def __init__(
        self,
        nodes: Mapping[str, Node],
        known_ids: Set[str],
        reporter: Reporter,
        schemas: SchemaChecker,
    ) -> None:
        self.nodes = nodes
        self.known = known_ids
        self.reporter = reporter
        self.schemas = schemas
        self._seen: set[tuple[str, str, str]] = set()
        self._checked: set[tuple[int, int]] = set()
        self._keep: list[Any] = []

    def _once(self, code: str, message: str, path: str, help: str | None = None) -> None:
        key = (code, path, message)
        if key not in self._seen:
            self._seen.add(key)
            self.reporter.error(code, message, path, help)

    def check_all(self) -> None:
        for node in self.nodes.values():
            self.check_needs(node)
            self.check_templates(node)
            draft = node.draft
            if draft.synthetic is None and draft.output_schema is not None:
                if self._first(draft.output_schema, None):
                    self.schemas.check(
                        draft.output_schema,
                        sub_path(draft.path, "outputSchema"),
                        f"task `{draft.id}` outputSchema",
                    )
        for node in self.nodes.values():
            if node.uses.kind == "router":
                self.check_router(node)

    def _first(self, value: Any, needs: Any) -> bool:
        """True the first time this (value, needs) pair of objects is seen."""
        key = (id(value), id(needs))
        if key in self._checked:
            return False
        self._checked.add(key)
        self._keep.append((value, needs))
        return True

    def check_needs(self, node: Node) -> None:
        draft = node.draft
        if not self._first(draft.needs, None):
            return
        for index, need in enumerate(draft.needs):
            if need not in self.known:
                self._once(
                    "missing_reference",
                    f"task `{draft.id}` needs unknown task `{need}`",
                    sub_path(draft.path, "needs", index),
                    "fix the id or add the task; ids of expanded tasks are the source task's id",
                )

    def _values(self, node: Node, value: Any, base: str, needs: Set[str] | None, what: str) -> None:
        """Syntax, existence of read tasks and (with ``needs``) the direct-``needs`` rule."""
        draft = node.draft
        for location, message in templating.problems(value):
            self._once(
                "invalid_template",
                f"task `{draft.id}` {what}: {message}",
                base + location,
                "fix the template; see the template reference (docs/templates.md)",
            )
        for location, task_id in templating.task_reads(value):
            if task_id not in self.known:
                self._once(
                    "missing_reference",
                    f"task `{draft.id}` {what} reads unknown task `{task_id}`",
                    base + location,
                    "fix the task id in the template",
                )
            elif needs is not None and task_id not in needs:
                self._once(
                    "invalid_template",
                    f"task `{draft.id}` must declare `{task_id}` in needs before reading its "
                    "output",
                    base + location,
                    f"add `{task_id}` to this task's needs",
                )
        for location, task_id, rest in templating.artifact_reads(value):
            self._artifact_read(draft.id, what, task_id, rest, base + location)

    def _artifact_read(
        self, reader: str, what: str, task_id: str, rest: tuple[str, ...], path: str
    ) -> None:
        """``tasks.<id>.artifacts.<name>[.<field>]`` must name an artifact the task declares."""
        node = self.nodes.get(task_id)
        if node is None:
            return  # an unknown task is reported above
        declared = [str(a["name"]) for a in node.draft.artifacts or ()]
        if rest[0] not in declared:
            self._once(
                "missing_reference",
                f"task `{reader}` {what} reads artifact `{rest[0]}` of task `{task_id}`, "
                "which declares "
                + (f"only {', '.join(f'`{n}`' for n in declared)}" if declared else "none"),
                path,
                f"declare it in `{task_id}`'s artifacts ([{{name: {rest[0]}, path: …}}]) or fix "
                "the name",
            )
        elif len(rest) > 1 and (len(rest) > 2 or rest[1] not in templating.ARTIFACT_FIELDS):
            self._once(
                "invalid_template",
                f"task `{reader}` {what} reads `{'.'.join(rest[1:])}` of artifact `{rest[0]}`; "
                f"an artifact version has {', '.join(templating.ARTIFACT_FIELDS)}",
                path,
                f"read e.g. tasks.{task_id}.artifacts.{rest[0]}.digest",
            )

    def check_templates(self, node: Node) -> None:
        draft = node.draft
        needs = set(draft.needs)
        if self._first(node.input, draft.needs):
            base = draft.with_path or sub_path(draft.path, "with")
            self._values(node, node.input, base, needs, "with")
        bindings = draft.expansion.bindings if draft.expansion is not None else {}
        for key, value in node.vars.items():
            if not templating.contains_template(value):
                continue
            if key not in bindings and not self._first(value, draft.needs):
                continue  # a source var shared by expanded children: checked once
            if key in bindings:
                base = draft.binding_path or sub_path(draft.path, "vars")
            elif key in draft.vars or node.uses.kind != "agent":
                base = sub_path(draft.path, "vars", key)
            else:
                base = sub_path("spec.agents", str(node.uses.name), "vars", key)
            self._values(node, value, base, needs, "vars")
        if draft.when is not None and self._first(draft.when, None):
            why = templating.condition_problem(draft.when)
            if why is not None:
                self._once(
                    "invalid_template",
                    f"task `{draft.id}` when: {why}",
                    sub_path(draft.path, "when"),
                    'write `when` as one condition template, e.g. "${{ inputs.x == 1 }}"',
                )
        if node.compensate is not None and self._first(node.compensate, None):
            self._values(
                node,
                node.compensate.input,
                sub_path(draft.path, "compensate", "with"),
                None,
                "compensate.with",
            )

    def check_router(self, node: Node) -> None:
        draft = node.draft
        route = draft.route or {}
        route_path = sub_path(draft.path, "route")
        select = str(route.get("select", ""))
        select_path = sub_path(route_path, "select")
        if not templating.is_whole_template(select):
            self._once(
                "invalid_template",
                f"router `{draft.id}` select must be exactly one `${{{{ … }}}}` template",
                select_path,
                'write it as one whole template, e.g. "${{ inputs.channel }}"',
            )
        else:
            self._values(node, select, select_path, set(draft.needs), "select")
        seen: set[str] = set()
        destinations = [
            (sub_path(route_path, "cases", index, "tasks", position), task_id)
            for index, case in enumerate(route.get("cases", ()))
            for position, task_id in enumerate(case.get("tasks", ()))
        ] + [
            (sub_path(route_path, "default", position), task_id)
            for position, task_id in enumerate(route.get("default", ()))
        ]
        for path, destination in destinations:
            if destination in seen:
                self._once(
                    "schema_violation",
                    f"router `{draft.id}` lists destination `{destination}` more than once",
                    path,
                    "list each destination in exactly one case or the default",
                )
                continue
            seen.add(destination)
            target = self.nodes.get(destination)
            if target is None:
                if destination not in self.known:
                    self._once(
                        "missing_reference",
                        f"router `{draft.id}` routes to unknown task `{destination}`",
                        path,
                        "fix the destination id",
                    )
                continue
            # Unlike upstream: an expanded task or sub-workflow is judged by the needs its
            # source declared (its aggregate's own needs are its children).
            declared = (
                target.draft.source_needs
                if target.uses.kind in _AGGREGATE_KINDS
                else tuple(target.draft.needs)
            )
            if draft.id not in declared:
                self._once(
                    "schema_violation",
                    f"routed task `{destination}` must declare router `{draft.id}` in needs",
                    path,
                    f"add `{draft.id}` to the needs of `{destination}`",
                )
                continue
            target.guards.append(draft.id)
            for guarded in target.draft.guard_targets:
                if guarded in self.nodes:
                    self.nodes[guarded].guards.append(draft.id)
