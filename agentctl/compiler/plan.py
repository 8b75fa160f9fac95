"""The compiled plan (docs/compiler.md): what the executor walks and what a run stores.

A plan is plain data. Every record is a frozen dataclass whose ``to_json`` gives the
camelCase wire shape upstream uses (``tasks`` is an object keyed by task id, ``uses`` is a
``{kind, name}`` pair whose ``name`` is a string for actions and agents and a small object
for the synthetic kinds). ``Plan.from_json`` reads that shape back, so a stored plan is the
plan — the executor never recompiles a run's workflow to learn its graph.

Two fingerprints per task are our addition: ``definitionFingerprint`` (SHA-256 over the
canonical JSON of the compiled task record) and ``outputContractFingerprint`` (over its
effective output contract). Retry/repair planners compare them to decide whether a stored
task result is still valid under a newly compiled plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from agentctl.compiler.requirements import (
    EffectRequirement,
    ProviderRequirement,
    Requirements,
    ToolRequirement,
)
from agentctl.digest import canonical_json, string_json
from agentctl.errors import NewerFormatError, PersistenceError

__all__ = [
    "PLAN_FORMAT_VERSION",
    "BackoffPolicy",
    "Budget",
    "Compensation",
    "EffectRequirement",
    "Expansion",
    "Plan",
    "PlanArtifact",
    "PlanTask",
    "Predictability",
    "ProviderRequirement",
    "Requirements",
    "RetryPolicy",
    "check_plan_format",
    "encoded_rows",
    "RouteGuard",
    "TaskUses",
    "ToolRequirement",
    "UsesKind",
    "worst_predictability",
]

PLAN_FORMAT_VERSION = 1

Predictability = Literal["fully_predictable", "partially_predictable", "requires_execution"]
UsesKind = Literal[
    "action",
    "agent",
    "aggregate",
    "router",
    "loop_aggregate",
    "subworkflow_input",
    "subworkflow_aggregate",
]

_PREDICTABILITY_RANK: dict[str, int] = {
    "fully_predictable": 0,
    "partially_predictable": 1,
    "requires_execution": 2,
}
_USES_KINDS = frozenset(get_args(UsesKind))

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_HEADER_ONLY = frozenset({"taskCount", "artifactTasks"})

#: Task record fields left out of a stored row when they hold these values (their
#: defaults): most tasks declare none of them, and every run stores one row per task.
_ROW_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "needs": [],
        "expansion": None,
        "routeGuards": [],
        "memoryWrites": [],
        "when": None,
        "vars": {},
        "input": {},
        "retry": {"maxAttempts": 1, "backoffMs": 0},
        "failure": "stop",
        "compensate": None,
        "outputSchema": None,
    }
)


def encoded_rows(tasks: Iterable[PlanTask]) -> Iterator[str]:
    """``canonical_json(task.to_row())`` of each task, in order, written out member by member
    in sorted key order: a run stores one row per task, and a fan-out's children share
    their input, output schema, uses and retry objects, whose texts are made once here
    rather than once per child. The text is the same (a property test holds it to
    ``canonical_json(task.to_row())``)."""
    writer = _RowWriter()
    for task in tasks:
        yield writer.row(task)


class _RowWriter:
    """:func:`encoded_rows`' texts of shared parts, by identity, for one call."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, int], tuple[Any, str]] = {}
        self._retries: dict[int, tuple[RetryPolicy, str | None]] = {}

    def _shared(self, key: str, value: Any, to_json: Callable[[Any], Any]) -> str:
        found = self._memo.get((key, id(value)))
        if found is None or found[0] is not value:
            found = self._memo[(key, id(value))] = (value, canonical_json(to_json(value)))
        return found[1]

    def _retry(self, retry: RetryPolicy) -> str | None:
        """The retry policy's text, or None when it is the default a row leaves out."""
        found = self._retries.get(id(retry))
        if found is None or found[0] is not retry:
            data = retry.to_json()
            text = None if data == _ROW_DEFAULTS["retry"] else canonical_json(data)
            found = self._retries[id(retry)] = (retry, text)
        return found[1]

    def row(self, task: PlanTask) -> str:
        # Members in sorted key order; those left out of a row at their defaults
        # (_ROW_DEFAULTS) are skipped under the same conditions as PlanTask.to_row.
        parts: list[str] = []
        if task.artifacts:
            parts.append('"artifacts":' + canonical_json([a.to_json() for a in task.artifacts]))
        if task.compensate is not None:
            parts.append('"compensate":' + self._shared("c", task.compensate, _to_json))
        parts.append('"definitionFingerprint":' + string_json(task.definition_fingerprint))
        if task.expansion is not None:
            parts.append('"expansion":' + canonical_json(task.expansion.to_json()))
        if task.failure != "stop":
            parts.append('"failure":' + string_json(task.failure))
        if task.input:
            parts.append('"input":' + self._shared("i", task.input, dict))
        if task.memory_writes:
            parts.append('"memoryWrites":' + canonical_json(list(task.memory_writes)))
        if task.needs:
            parts.append('"needs":' + canonical_json(list(task.needs)))
        parts.append('"outputContractFingerprint":' + string_json(task.output_contract_fingerprint))
        if task.output_schema is not None:
            parts.append('"outputSchema":' + self._shared("o", task.output_schema, dict))
        parts.append('"predictability":' + string_json(task.predictability))
        if task.resolved_definition:
            parts.append('"resolvedDefinition":' + string_json(task.resolved_definition))
        retry = self._retry(task.retry)
        if retry is not None:
            parts.append('"retry":' + retry)
        if task.route_guards:
            parts.append(
                '"routeGuards":' + canonical_json([g.to_json() for g in task.route_guards])
            )
        if task.session:
            parts.append('"session":' + canonical_json(dict(task.session)))
        seconds = task.timeout_seconds
        parts.append(
            '"timeoutSeconds":'
            + (int.__repr__(seconds) if type(seconds) is int else canonical_json(seconds))
        )
        parts.append('"uses":' + self._shared("u", task.uses, _to_json))
        if task.vars:
            parts.append('"vars":' + canonical_json(dict(task.vars)))
        if task.when is not None:
            parts.append('"when":' + string_json(task.when))
        return "{" + ",".join(parts) + "}"


def _to_json(value: Any) -> Any:
    return value.to_json()


def check_plan_format(data: Mapping[str, Any]) -> int:
    """The ``formatVersion`` of a stored plan (or its header); a newer one is refused."""
    version = data.get("formatVersion")
    if not isinstance(version, int):
        raise PersistenceError(
            "stored plan has no integer formatVersion",
            hint="the run record is corrupt; recompile the workflow and start a new run",
        )
    if version > PLAN_FORMAT_VERSION:
        raise NewerFormatError(
            f"stored plan has formatVersion {version}, newer than this agentctl "
            f"understands ({PLAN_FORMAT_VERSION})",
            hint="upgrade agentctl to read this run",
        )
    return version


def worst_predictability(values: list[Predictability]) -> Predictability:
    """The plan's predictability is the worst of its tasks' (an empty plan is predictable)."""
    worst: Predictability = "fully_predictable"
    for value in values:
        if _PREDICTABILITY_RANK[value] > _PREDICTABILITY_RANK[worst]:
            worst = value
    return worst


@dataclass(frozen=True, slots=True)
class TaskUses:
    """What a task runs: ``kind`` plus a kind-specific ``name`` (string or JSON object).

    ``action``/``agent``: the definition name. ``aggregate``: the list of child ids.
    ``router``: ``{select, cases, default}``. ``loop_aggregate``: ``{children, condition}``.
    ``subworkflow_input``: ``{name, version}``. ``subworkflow_aggregate``:
    ``{name, version, children}``.
    """

    kind: UsesKind
    name: Any

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}

    @property
    def children(self) -> list[str]:
        """Child task ids of an aggregate of any kind (empty for other kinds)."""
        if self.kind == "aggregate":
            return list(self.name)
        if self.kind in ("loop_aggregate", "subworkflow_aggregate"):
            return list(self.name["children"])
        return []


@dataclass(frozen=True, slots=True)
class Expansion:
    """Where an expanded child came from: source task id, index and its bindings."""

    parent: str
    index: int
    bindings: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"parent": self.parent, "index": self.index, "bindings": dict(self.bindings)}


@dataclass(frozen=True, slots=True)
class RouteGuard:
    """The task runs only if ``router`` selected it (else it is skipped with a route record)."""

    router: str

    def to_json(self) -> dict[str, Any]:
        return {"router": self.router}


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """A fixed or exponential wait before a retried attempt (``retry.backoff``)."""

    kind: Literal["fixed", "exponential"] = "fixed"
    initial_ms: int = 1000
    max_ms: int = 60000
    multiplier: float = 2.0
    jitter: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "initialMs": self.initial_ms,
            "maxMs": self.max_ms,
            "multiplier": self.multiplier,
            "jitter": self.jitter,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BackoffPolicy:
        kind = data.get("kind", "fixed")
        if kind not in ("fixed", "exponential"):
            raise ValueError(f"unknown backoff kind `{kind}`")
        return cls(
            kind,
            int(data.get("initialMs", 1000)),
            int(data.get("maxMs", 60000)),
            float(data.get("multiplier", 2.0)),
            float(data.get("jitter", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 1
    backoff_ms: int = 0
    backoff: BackoffPolicy | None = None
    # None: every confirmed failure may be retried; else only failures matching an entry.
    retry_on: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"maxAttempts": self.max_attempts, "backoffMs": self.backoff_ms}
        # Only present when declared, so plans (and fingerprints) of workflows that do not
        # use them stay byte-identical.
        if self.backoff is not None:
            out["backoff"] = self.backoff.to_json()
        if self.retry_on is not None:
            out["retryOn"] = list(self.retry_on)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetryPolicy:
        backoff = data.get("backoff")
        retry_on = data.get("retryOn")
        return cls(
            int(data.get("maxAttempts", 1)),
            int(data.get("backoffMs", 0)),
            None if backoff is None else BackoffPolicy.from_json(backoff),
            None if retry_on is None else tuple(str(entry) for entry in retry_on),
        )


@dataclass(frozen=True, slots=True)
class Compensation:
    """A compiled ``compensate``: the action reference, merged input, retry and timeout."""

    uses: str
    input: Mapping[str, Any]
    retry: RetryPolicy
    timeout_seconds: int

    def to_json(self) -> dict[str, Any]:
        return {
            "uses": self.uses,
            "input": dict(self.input),
            "retry": self.retry.to_json(),
            "timeoutSeconds": self.timeout_seconds,
        }


@dataclass(frozen=True, slots=True)
class PlanArtifact:
    """A declared named artifact: the workspace file ``path`` is version-recorded as ``name``."""

    name: str
    path: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "path": self.path}


@dataclass(frozen=True, slots=True)
class PlanTask:
    """One compiled task. ``output_schema`` is the *effective* output contract
    (docs/workflow-language.md)."""

    id: str
    uses: TaskUses
    needs: tuple[str, ...]
    expansion: Expansion | None
    route_guards: tuple[RouteGuard, ...]
    memory_writes: tuple[str, ...]
    when: str | None
    vars: Mapping[str, Any]
    input: Mapping[str, Any]
    retry: RetryPolicy
    timeout_seconds: int
    failure: Literal["stop", "continue"]
    compensate: Compensation | None
    output_schema: Mapping[str, Any] | None
    predictability: Predictability
    artifacts: tuple[PlanArtifact, ...] = ()
    # ``{"from": {"run", "task"}}`` or ``{"name"}``: the provider session an agent continues.
    session: Mapping[str, Any] | None = None
    # Digest of the action or agent the task runs, with everything behind it
    # (agentctl.compiler.identity); empty for synthetic tasks and plans of older releases.
    resolved_definition: str = ""
    definition_fingerprint: str = ""
    output_contract_fingerprint: str = ""

    def definition_json(self) -> dict[str, Any]:
        """The record without fingerprints: what ``definitionFingerprint`` is taken over."""
        return {
            "id": self.id,
            "uses": self.uses.to_json(),
            "needs": list(self.needs),
            "expansion": None if self.expansion is None else self.expansion.to_json(),
            "routeGuards": [guard.to_json() for guard in self.route_guards],
            "memoryWrites": list(self.memory_writes),
            "when": self.when,
            "vars": dict(self.vars),
            "input": dict(self.input),
            "retry": self.retry.to_json(),
            "timeoutSeconds": self.timeout_seconds,
            "failure": self.failure,
            "compensate": None if self.compensate is None else self.compensate.to_json(),
            "outputSchema": None if self.output_schema is None else dict(self.output_schema),
            "predictability": self.predictability,
            # Only when declared: plans and fingerprints of other workflows stay as they were.
            **({"artifacts": [a.to_json() for a in self.artifacts]} if self.artifacts else {}),
            **({"session": dict(self.session)} if self.session else {}),
            **(
                {"resolvedDefinition": self.resolved_definition} if self.resolved_definition else {}
            ),
        }

    def to_json(self) -> dict[str, Any]:
        out = self.definition_json()
        out["definitionFingerprint"] = self.definition_fingerprint
        out["outputContractFingerprint"] = self.output_contract_fingerprint
        return out

    def to_row(self) -> dict[str, Any]:
        """The compact stored record of the task (one row per task in a run's plan): the
        id lives in the row's key, and fields at their defaults are left out.
        :meth:`from_row` gives back the identical task."""
        out = self.to_json()
        del out["id"]
        for key, default in _ROW_DEFAULTS.items():
            if key in out and out[key] == default:
                del out[key]
        return out

    @classmethod
    def from_row(cls, task_id: str, data: Mapping[str, Any]) -> PlanTask:
        """The task of a compact stored record (:meth:`to_row`)."""
        return cls.from_json({**_ROW_DEFAULTS, **data, "id": task_id})

    @property
    def is_aggregate(self) -> bool:
        """Aggregates are exempt from dependency-skip propagation (docs/compiler.md)."""
        return self.uses.kind in ("aggregate", "loop_aggregate", "subworkflow_aggregate")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlanTask:
        uses = data["uses"]
        if uses["kind"] not in _USES_KINDS:
            raise ValueError(f"unknown task kind `{uses['kind']}`")
        expansion = data.get("expansion")
        compensate = data.get("compensate")
        failure = data.get("failure", "stop")
        if failure not in ("stop", "continue"):
            raise ValueError(f"unknown failure behaviour `{failure}`")
        predictability = data["predictability"]
        if predictability not in _PREDICTABILITY_RANK:
            raise ValueError(f"unknown predictability `{predictability}`")
        return cls(
            id=str(data["id"]),
            uses=TaskUses(uses["kind"], uses["name"]),
            needs=tuple(data.get("needs", ())),
            expansion=None
            if expansion is None
            else Expansion(
                str(expansion["parent"]), int(expansion["index"]), dict(expansion["bindings"])
            ),
            route_guards=tuple(RouteGuard(str(g["router"])) for g in data.get("routeGuards", ())),
            memory_writes=tuple(data.get("memoryWrites", ())),
            when=data.get("when"),
            vars=dict(data.get("vars") or {}),
            input=dict(data.get("input") or {}),
            retry=RetryPolicy.from_json(data.get("retry") or {}),
            timeout_seconds=int(data["timeoutSeconds"]),
            failure=failure,
            compensate=None
            if compensate is None
            else Compensation(
                uses=str(compensate["uses"]),
                input=dict(compensate.get("input") or {}),
                retry=RetryPolicy.from_json(compensate.get("retry") or {}),
                timeout_seconds=int(compensate["timeoutSeconds"]),
            ),
            output_schema=data.get("outputSchema"),
            predictability=predictability,
            artifacts=tuple(
                PlanArtifact(str(a["name"]), str(a["path"])) for a in data.get("artifacts") or ()
            ),
            session=data.get("session"),
            resolved_definition=str(data.get("resolvedDefinition", "")),
            definition_fingerprint=str(data.get("definitionFingerprint", "")),
            output_contract_fingerprint=str(data.get("outputContractFingerprint", "")),
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """Run-wide limits as declared plus the static counts the compiler checked them against."""

    limits: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    pricing: Mapping[str, Any] | None = None
    planned_tasks: int = 0
    planned_expansion_items: int = 0
    planned_loop_iterations: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"limits": dict(self.limits)}
        if self.pricing is not None:
            out["pricing"] = dict(self.pricing)
        out["plannedTasks"] = self.planned_tasks
        out["plannedExpansionItems"] = self.planned_expansion_items
        out["plannedLoopIterations"] = self.planned_loop_iterations
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Budget:
        return cls(
            limits=dict(data.get("limits") or {}),
            pricing=data.get("pricing"),
            planned_tasks=int(data.get("plannedTasks", 0)),
            planned_expansion_items=int(data.get("plannedExpansionItems", 0)),
            planned_loop_iterations=int(data.get("plannedLoopIterations", 0)),
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """A compiled workflow. ``tasks`` is keyed by id; ``order`` is the stable plan order."""

    workflow_name: str
    workflow_digest: str
    plan_digest: str
    order: tuple[str, ...]
    max_concurrency: int
    tasks: Mapping[str, PlanTask]
    predictability: Predictability
    requirements: Requirements
    budget: Budget
    format_version: int = PLAN_FORMAT_VERSION
    variables: Mapping[str, Any] | None = None
    """The invocation variables (``--var``/``--vars-file``) the plan was compiled with:
    ``{values, sources}``. Absent when there were none. Retry and repair compile the
    workflow again with these values, so a derived run sees what its source saw."""

    def task(self, task_id: str) -> PlanTask:
        return self.tasks[task_id]

    def ordered_tasks(self) -> list[PlanTask]:
        """Tasks in plan order (the scheduling tie-break and commit order)."""
        return [self.tasks[task_id] for task_id in self.order]

    def digest_material(self) -> dict[str, Any]:
        """What ``planDigest`` is taken over: name, workflow digest, order, concurrency,
        tasks, requirements and budget (everything except the digest itself).

        Tasks enter through their two fingerprints, each a SHA-256 over the task's full
        canonical record, so the digest covers every task field without serialising the
        whole task table a second time.
        """
        material: dict[str, Any] = {
            "workflowName": self.workflow_name,
            "workflowDigest": self.workflow_digest,
            "order": list(self.order),
            "maxConcurrency": self.max_concurrency,
            "tasks": {
                task_id: [
                    self.tasks[task_id].definition_fingerprint,
                    self.tasks[task_id].output_contract_fingerprint,
                ]
                for task_id in self.order
            },
            "requirements": self.requirements.to_json(),
            "budget": self.budget.to_json(),
        }
        if self.variables is not None:
            # Values only: the same value given by a flag or a file is the same plan.
            material["variables"] = dict(self.variables.get("values") or {})
        return material

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "formatVersion": self.format_version,
            "workflowName": self.workflow_name,
            "workflowDigest": self.workflow_digest,
            "planDigest": self.plan_digest,
            "order": list(self.order),
            "maxConcurrency": self.max_concurrency,
            "tasks": {task_id: self.tasks[task_id].to_json() for task_id in self.order},
            "predictability": self.predictability,
            "requirements": self.requirements.to_json(),
            "budget": self.budget.to_json(),
        }
        if self.variables is not None:
            out["variables"] = dict(self.variables)
        return out

    def header_json(self) -> dict[str, Any]:
        """The plan without its task table and order: what a run row stores (each task is
        a row of its own, in plan order; see :meth:`from_parts`)."""
        out: dict[str, Any] = {
            "formatVersion": self.format_version,
            "workflowName": self.workflow_name,
            "workflowDigest": self.workflow_digest,
            "planDigest": self.plan_digest,
            "maxConcurrency": self.max_concurrency,
            "predictability": self.predictability,
            "requirements": self.requirements.to_json(),
            "budget": self.budget.to_json(),
        }
        if self.variables is not None:
            out["variables"] = dict(self.variables)
        out["taskCount"] = len(self.order)
        # Named artifacts are read by later tasks' templates: the few tasks declaring them
        # are listed so a reader need not load every task to find them.
        out["artifactTasks"] = [t for t in self.order if self.tasks[t].artifacts]
        return out

    @classmethod
    def from_parts(
        cls, header: Mapping[str, Any], records: list[tuple[str, Mapping[str, Any]]]
    ) -> Plan:
        """The plan of a stored header (:meth:`header_json`) and every task's stored row
        (:meth:`PlanTask.to_row`) as ``(task id, record)`` in plan order."""
        data = {k: v for k, v in header.items() if k not in _HEADER_ONLY}
        data["order"] = [task_id for task_id, _ in records]
        data["tasks"] = {
            task_id: {**_ROW_DEFAULTS, **row, "id": task_id} for task_id, row in records
        }
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        """Read a stored plan; a newer ``formatVersion`` or a malformed record is refused."""
        version = check_plan_format(data)
        try:
            tasks = {str(k): PlanTask.from_json(v) for k, v in dict(data["tasks"]).items()}
            order = tuple(str(task_id) for task_id in data["order"])
            predictability = data["predictability"]
            if predictability not in _PREDICTABILITY_RANK:
                raise ValueError(f"unknown predictability `{predictability}`")
            if set(order) != set(tasks):
                raise ValueError("plan order does not list exactly the plan's tasks")
            return cls(
                workflow_name=str(data["workflowName"]),
                workflow_digest=str(data["workflowDigest"]),
                plan_digest=str(data["planDigest"]),
                order=order,
                max_concurrency=int(data["maxConcurrency"]),
                tasks=tasks,
                predictability=predictability,
                requirements=Requirements.from_json(data.get("requirements") or {}),
                budget=Budget.from_json(data.get("budget") or {}),
                format_version=version,
                variables=dict(data["variables"]) if data.get("variables") else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PersistenceError(
                f"stored plan is malformed: {exc}",
                hint="the run record is corrupt; recompile the workflow and start a new run",
            ) from exc
