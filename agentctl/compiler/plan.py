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

The parts a task is made of (its uses, retry, compensation …) are in
``compiler/task_parts.py``; the fast writer of a run's stored task rows is
``compiler/plan_rows.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from agentctl.compiler.requirements import Requirements
from agentctl.compiler.task_parts import (
    PREDICTABILITY_RANK,
    USES_KINDS,
    Compensation,
    Expansion,
    PlanArtifact,
    Predictability,
    RetryPolicy,
    RouteGuard,
    TaskUses,
)
from agentctl.errors import NewerFormatError, PersistenceError

__all__ = [
    "PLAN_FORMAT_VERSION",
    "ROW_DEFAULTS",
    "Budget",
    "Plan",
    "PlanTask",
    "check_plan_format",
]

PLAN_FORMAT_VERSION = 1

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_HEADER_ONLY = frozenset({"taskCount", "artifactTasks"})

#: Task record fields left out of a stored row when they hold these values (their
#: defaults): most tasks declare none of them, and every run stores one row per task.
ROW_DEFAULTS: Mapping[str, Any] = MappingProxyType(
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
        for key, default in ROW_DEFAULTS.items():
            if key in out and out[key] == default:
                del out[key]
        return out

    @classmethod
    def from_row(cls, task_id: str, data: Mapping[str, Any]) -> PlanTask:
        """The task of a compact stored record (:meth:`to_row`)."""
        return cls.from_json({**ROW_DEFAULTS, **data, "id": task_id})

    @property
    def is_aggregate(self) -> bool:
        """Aggregates are exempt from dependency-skip propagation (docs/compiler.md)."""
        return self.uses.kind in ("aggregate", "loop_aggregate", "subworkflow_aggregate")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlanTask:
        uses = data["uses"]
        if uses["kind"] not in USES_KINDS:
            raise ValueError(f"unknown task kind `{uses['kind']}`")
        expansion = data.get("expansion")
        compensate = data.get("compensate")
        failure = data.get("failure", "stop")
        if failure not in ("stop", "continue"):
            raise ValueError(f"unknown failure behaviour `{failure}`")
        predictability = data["predictability"]
        if predictability not in PREDICTABILITY_RANK:
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
            task_id: {**ROW_DEFAULTS, **row, "id": task_id} for task_id, row in records
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
            if predictability not in PREDICTABILITY_RANK:
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
