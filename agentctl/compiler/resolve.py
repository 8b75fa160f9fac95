"""Per-task compilation (docs/compiler.md step 3): ids, ``uses``, inputs, vars, memory writes,
compensation, timeouts, output contracts and predictability.

Work that depends only on the source definition (merging action defaults, inferring memory
writes, compiling ``compensate``) is memoised per shared source object, so the children of
one ``foreach`` are compiled once and share the results; this is what keeps compile time
linear with a small constant for 10,000 children.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentctl.compiler.drafts import Draft, Reporter, sub_path
from agentctl.compiler.effects import (
    ACTION_KINDS,
    COMPENSATION_KINDS,
    MUTATING_EFFECT_CLASSES,
)
from agentctl.compiler.schemas import (
    ACTION_CONTRACT,
    AGGREGATE_CONTRACT,
    LOOP_AGGREGATE_CONTRACT,
    ROUTER_CONTRACT,
)
from agentctl.compiler.task_parts import Compensation, Predictability, RetryPolicy, TaskUses
from agentctl.spec.models_runtime import Runtime
from agentctl.spec.variables import VariableLayers

__all__ = ["Node", "Resolver"]

_MEMORY_WRITE_KINDS = frozenset({"builtin.memory.write", "builtin.long_term_memory.promote"})


@dataclass(slots=True)
class Node:
    """A resolved task: everything the plan records except guards, order and fingerprints."""

    draft: Draft
    uses: TaskUses
    action_kind: str | None
    input: Mapping[str, Any]
    vars: Mapping[str, Any]
    memory_writes: tuple[str, ...]
    compensate: Compensation | None
    retry: RetryPolicy
    timeout_seconds: int
    output_contract: Mapping[str, Any] | None
    predictability: Predictability
    guards: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.draft.id


class Resolver:
    def __init__(
        self,
        spec: Mapping[str, Any],
        reporter: Reporter,
        layers: VariableLayers | None = None,
    ) -> None:
        self.actions: Mapping[str, Any] = spec.get("actions") or {}
        self.agents: Mapping[str, Any] = spec.get("agents") or {}
        self.tools: Mapping[str, Any] = spec.get("tools") or {}
        runtime = spec.get("runtime") or {}
        self.default_timeout = int(
            runtime.get("defaultTimeoutSeconds", Runtime.default_of("default_timeout_seconds"))
        )
        self.reporter = reporter
        self._memo: dict[tuple[str, int, int], Any] = {}
        self._keep: list[Any] = []
        self._uses_cache: dict[str, TaskUses] = {}
        self.layers = layers or VariableLayers()
        self._top = self.layers.invocation_values()
        self._below: dict[tuple[str | None, str], dict[str, Any]] = {}

    def _cached(self, kind: str, *objects: Any) -> tuple[bool, Any, tuple[str, int, int]]:
        key = (kind, id(objects[0]), id(objects[1]) if len(objects) > 1 else 0)
        if key in self._memo:
            return True, self._memo[key], key
        self._keep.append(objects)  # ids stay unique while the objects are alive
        return False, None, key

    def resolve_all(self, drafts: list[Draft]) -> dict[str, Node]:
        nodes: dict[str, Node] = {}
        for draft in drafts:
            if draft.id in nodes:
                self.reporter.error(
                    "duplicate_task",
                    f"duplicate task id `{draft.id}`",
                    sub_path(draft.path, "id"),
                    help="task ids must be unique after expansion; rename one of them",
                )
                continue
            node = self.resolve(draft)
            if node is not None:
                nodes[draft.id] = node
        return nodes

    def resolve(self, draft: Draft) -> Node | None:
        if draft.synthetic is not None:
            return self._synthetic(draft, draft.synthetic)
        if draft.uses == "router":
            route = draft.route or {}
            uses = TaskUses(
                "router",
                {
                    "select": route.get("select", ""),
                    "cases": [
                        {"equals": case.get("equals"), "tasks": list(case.get("tasks", ()))}
                        for case in route.get("cases", ())
                    ],
                    "default": list(route.get("default", ())),
                },
            )
            return self._node(
                draft,
                uses,
                None,
                dict(draft.with_),
                self._vars(draft, None),
                (),
                None,
                ROUTER_CONTRACT,
                "fully_predictable",
            )
        prefix, _, name = draft.uses.partition(":")
        if prefix == "action" and name in self.actions:
            action = self.actions[name]
            kind = str(action.get("kind"))
            hit, merged, key = self._cached("input", draft.with_, action)
            if not hit:
                merged = {**(action.get("with") or {}), **draft.with_}
                self._memo[key] = merged
            writes = self._memory_writes(draft, kind, merged)
            compensate = self._compensate(draft, True, kind in COMPENSATION_KINDS)
            info = ACTION_KINDS.get(kind)
            predictability: Predictability = (
                info.predictability if info is not None else "requires_execution"
            )
            return self._node(
                draft,
                self._uses("action", name),
                kind,
                merged,
                self._vars(draft, None),
                writes,
                compensate,
                ACTION_CONTRACT,
                predictability,
            )
        if prefix == "agent" and name in self.agents:
            agent = self.agents[name]
            task_vars = self._vars(draft, name)
            self._memory_writes(draft, None, draft.with_)
            mutating = any(
                (self.tools.get(tool) or {}).get("effectClass") in MUTATING_EFFECT_CLASSES
                for tool in agent.get("tools", ())
            )
            compensate = self._compensate(draft, mutating, mutating)
            return self._node(
                draft,
                self._uses("agent", name),
                None,
                draft.with_,
                task_vars,
                (),
                compensate,
                agent.get("structuredOutput"),
                "requires_execution",
            )
        if prefix == "workflow":
            return None  # reported while flattening
        self.reporter.error(
            "missing_reference",
            f"task `{draft.id}` uses unknown `{draft.uses}`",
            sub_path(draft.path, "uses"),
            help=f"define `{name}` under spec.{prefix}s or fix the reference"
            if prefix in ("action", "agent")
            else "use action:<name>, agent:<name>, workflow:<name> or router",
        )
        return None

    def _vars(self, draft: Draft, agent: str | None) -> Mapping[str, Any]:
        """The task's variables: layers 1–5, its own ``vars``, the invocation, bindings.

        Expansion bindings (``foreachIndex``, the ``as`` name, ``matrix`` …) win over every
        layer; the reserved names cannot appear in one anyway."""
        key = (agent, draft.path)
        below = self._below.get(key)
        if below is None:
            agent_vars = (self.agents.get(agent) or {}).get("vars") or {} if agent else {}
            below = self._below[key] = self.layers.below_task(agent, agent_vars, draft.path)
        if not below and not self._top:
            return draft.vars
        bindings = draft.expansion.bindings if draft.expansion is not None else {}
        return {**below, **draft.vars, **self._top, **bindings}

    def _uses(self, kind: Literal["action", "agent"], name: str) -> TaskUses:
        """One shared ``TaskUses`` per definition (cheap identity-based fingerprinting)."""
        key = f"{kind}:{name}"
        uses = self._uses_cache.get(key)
        if uses is None:
            uses = self._uses_cache[key] = TaskUses(kind, name)
        return uses

    def _synthetic(self, draft: Draft, uses: TaskUses) -> Node:
        contract: Mapping[str, Any] | None
        if uses.kind == "aggregate":
            contract = AGGREGATE_CONTRACT
        elif uses.kind == "loop_aggregate":
            contract = LOOP_AGGREGATE_CONTRACT
        else:
            contract = draft.output_schema
        node = self._node(
            draft, uses, None, draft.with_, {}, (), None, contract, "fully_predictable"
        )
        # Aggregates and boundaries are bookkeeping: upstream gives them the default retry
        # and timeout whatever the source task declared.
        node.retry = RetryPolicy()
        return node

    def _node(
        self,
        draft: Draft,
        uses: TaskUses,
        action_kind: str | None,
        input: Mapping[str, Any],
        vars: Mapping[str, Any],
        writes: tuple[str, ...],
        compensate: Compensation | None,
        default_contract: Mapping[str, Any] | None,
        predictability: Predictability,
    ) -> Node:
        contract = draft.output_schema if draft.output_schema is not None else default_contract
        if draft.synthetic is not None:
            contract = default_contract
        return Node(
            draft=draft,
            uses=uses,
            action_kind=action_kind,
            input=input,
            vars=vars,
            memory_writes=writes,
            compensate=compensate,
            retry=self._retry(draft.retry),
            # Unlike upstream (docs/compiler.md): every task, expanded or not, carries its
            # own timeout.
            timeout_seconds=draft.timeout_seconds
            if draft.timeout_seconds is not None and draft.synthetic is None
            else self.default_timeout,
            output_contract=contract,
            predictability=predictability,
        )

    def _retry(self, retry: Mapping[str, Any]) -> RetryPolicy:
        hit, value, key = self._cached("retry", retry)
        if not hit:
            value = RetryPolicy.from_json(retry)
            self._memo[key] = value
        result: RetryPolicy = value
        return result

    def _memory_writes(
        self, draft: Draft, kind: str | None, merged: Mapping[str, Any]
    ) -> tuple[str, ...]:
        declared = draft.memory_writes
        hit, value, key = self._cached("writes", merged, declared)
        if hit:
            result: tuple[str, ...] = value
            return result
        path = sub_path(draft.path, "memoryWrites")
        writes = sorted(set(declared or ()))
        if kind not in _MEMORY_WRITE_KINDS:
            if declared is not None:
                self.reporter.error(
                    "schema_violation",
                    f"task `{draft.id}`: memoryWrites is only valid on builtin.memory.write "
                    "and builtin.long_term_memory.promote tasks",
                    path,
                    help="remove memoryWrites from this task",
                )
            self._memo[key] = ()
            return ()
        key_value = merged.get("key")
        key_path = sub_path(draft.with_path or sub_path(draft.path, "with"), "key")
        if not isinstance(key_value, str) or not key_value:
            self.reporter.error(
                "schema_violation",
                f"task `{draft.id}`: {kind} requires a non-empty string `key`",
                key_path,
                help="set with.key on the task or in the action's with defaults",
            )
        elif "${{" in key_value:
            if declared is None:
                self.reporter.error(
                    "schema_violation",
                    f"task `{draft.id}`: a templated memory key requires an explicit "
                    "memoryWrites set",
                    key_path,
                    help="list every key this task may write under memoryWrites",
                )
        elif declared is None:
            writes = [key_value]
        elif key_value not in writes:
            self.reporter.error(
                "schema_violation",
                f"task `{draft.id}`: literal memory key `{key_value}` is missing from memoryWrites",
                path,
                help=f"add `{key_value}` to memoryWrites",
            )
        result = tuple(writes)
        self._memo[key] = result
        return result

    def _compensate(self, draft: Draft, allowed: bool, mutating: bool) -> Compensation | None:
        definition = draft.compensate
        if definition is None:
            return None
        hit, value, key = self._cached("compensate", definition)
        if hit:
            cached: Compensation | None = value
            return cached
        path = sub_path(draft.path, "compensate")
        result: Compensation | None = None
        if not (allowed and mutating):
            self.reporter.error(
                "unsupported_capability",
                f"task `{draft.id}` declares compensate but has no potentially mutating effect",
                path,
                help="only writes, processes, memory writes, MCP/A2A calls and agents with "
                "mutating tools can be compensated; remove compensate",
            )
        uses = str(definition.get("uses", ""))
        prefix, _, name = uses.partition(":")
        action = self.actions.get(name) if prefix == "action" else None
        if prefix != "action":
            self.reporter.error(
                "unsupported_capability",
                f"task `{draft.id}` compensation must use a named action (`action:<name>`)",
                sub_path(path, "uses"),
            )
        elif action is None:
            self.reporter.error(
                "missing_reference",
                f"task `{draft.id}` compensation refers to unknown action `{name}`",
                sub_path(path, "uses"),
                help="define the inverse action under spec.actions",
            )
        elif action.get("kind") not in COMPENSATION_KINDS:
            self.reporter.error(
                "unsupported_capability",
                f"task `{draft.id}` compensation action `{name}` ({action.get('kind')}) "
                "is not effectful",
                sub_path(path, "uses"),
                help="an inverse must be a write, process, memory write, MCP or A2A action",
            )
        else:
            timeout = definition.get("timeoutSeconds")
            result = Compensation(
                uses=uses,
                input={**(action.get("with") or {}), **(definition.get("with") or {})},
                retry=self._retry(definition.get("retry") or {}),
                timeout_seconds=int(timeout) if timeout is not None else self.default_timeout,
            )
        self._memo[key] = result
        return result
