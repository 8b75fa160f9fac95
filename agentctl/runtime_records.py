"""The typed records :class:`agentctl.Runtime` returns, beside the engine's own
(``Approval``, ``EffectRecord``, ``Reconciliation``, ``NextStep``, ``RecoveryPlan``,
``CompensationPlan``), which it names here too so the facade has one place to export
them from, and the records read straight from stored rows (:mod:`agentctl.runtime_views`,
which a command that only reads the store imports instead).

Each is the document the matching command prints with ``--output json``, with attributes
instead of keys: ``to_json()`` gives that document byte for byte (``agentctl cancel``
prints ``CancelRequest.to_json()``). The engine's operations assemble them as JSON views
over several stored rows; :meth:`~agentctl.typed_records.CamelRecord.from_json` reads
such a view into its record, so the facade adds types without a second copy of what the
engine decides. docs/python-api.md lists every field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic.dataclasses import dataclass as record

from agentctl.amounts import amount
from agentctl.compiler import Plan
from agentctl.engine.dbcheck import DatabaseCheck
from agentctl.engine.effects.approvals import Approval
from agentctl.engine.effects.journal import EffectRecord, Reconciliation
from agentctl.engine.next_steps import NextStep, render
from agentctl.engine.recovery.compensation import CompensationPlan
from agentctl.engine.recovery.legacy_upgrade import (
    LegacyRunUpgrade,
    LegacyRunUpgradeAnalysis,
    LegacyTaskUpgradeAnalysis,
)
from agentctl.engine.recovery.planner import RecoveryPlan
from agentctl.engine.watching import RunLook, TaskLook
from agentctl.observability.audit import AuditEvent, ChainReport
from agentctl.runtime_admin import (
    DbMigration,
    EncryptionInventory,
    EncryptionKey,
    EncryptionMigration,
    SealedColumn,
)
from agentctl.runtime_views import (
    AuditCheck,
    CancelRequest,
    CompiledWorkflow,
    DoctorCheck,
    DoctorReport,
    Explanation,
    PausedTask,
    PauseRelease,
    ProviderCheck,
    ProviderSmoke,
    RunSummary,
    SessionDetail,
    SessionSummary,
    TaskProgress,
)
from agentctl.store.stats import DatabaseStats
from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

__all__ = [
    "Approval",
    "ApprovalDecision",
    "AuditCheck",
    "AuditEvent",
    "AuditLog",
    "ChainReport",
    "CancelRequest",
    "CompensationPlan",
    "CompiledWorkflow",
    "Conclusion",
    "DatabaseCheck",
    "DatabaseStats",
    "DbMigration",
    "EncryptionInventory",
    "EncryptionKey",
    "EncryptionMigration",
    "SealedColumn",
    "DoctorCheck",
    "DoctorReport",
    "EffectDetail",
    "EffectRecord",
    "Explanation",
    "LegacyRunUpgrade",
    "LegacyRunUpgradeAnalysis",
    "LegacyTaskUpgradeAnalysis",
    "NextStep",
    "PauseRelease",
    "PausedTask",
    "ProviderCheck",
    "ProviderSmoke",
    "Reconciliation",
    "RecoveryPlan",
    "RemoteContinuation",
    "RemoteTask",
    "RunLook",
    "RunRecap",
    "RunReport",
    "RunSummary",
    "RunTotals",
    "SessionDetail",
    "SessionSummary",
    "StoredPlan",
    "TaskLook",
    "TaskProgress",
    "TaskTotals",
    "TracedEffect",
]


@record(frozen=True, slots=True, config=CAMEL)
class ApprovalDecision(CamelRecord):
    """An approval or question after ``approve``/``reject``/``answer``; ``unchanged`` when
    it had been decided the same way before, and the run's next steps."""

    approval: Approval
    unchanged: bool
    next: list[NextStep]


@record(frozen=True, slots=True, config=CAMEL)
class Conclusion(CamelRecord):
    """An effect and the conclusion ``reconcile`` appended to it, with the next steps."""

    effect: EffectRecord
    reconciliation: Reconciliation
    next: list[NextStep]


@record(frozen=True, slots=True, config=CAMEL)
class RemoteTask(CamelRecord):
    """The A2A task a delegation's peer returned: which peer, its task id, its state."""

    peer: str
    task_id: str
    state: str


@record(frozen=True, slots=True, config=CAMEL)
class RemoteContinuation(CamelRecord):
    """What ``continue_remote`` concluded: the effect, the remote task it followed, the
    conclusion appended to the effect (``status``: ``applied``) and the next steps."""

    status: str
    effect: EffectRecord
    remote_task: RemoteTask
    reconciliation: Reconciliation
    next: list[NextStep]


@record(frozen=True, slots=True, config=CAMEL)
class EffectDetail:
    """One journaled effect with every conclusion appended to it, oldest first, and the
    remote task an A2A peer returned for it (None when there is none). Its JSON form is the
    effect's with ``reconciliations`` and ``remoteTask`` keys (``effects inspect``)."""

    effect: EffectRecord
    reconciliations: list[Reconciliation]
    remote_task: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = self.effect.to_json()
        data["reconciliations"] = [r.to_json() for r in self.reconciliations]
        data["remoteTask"] = self.remote_task
        return data


@record(frozen=True, slots=True, config=CAMEL)
class TracedEffect:
    """An effect with the ids of its telemetry span (None when telemetry was off); its
    JSON form is the effect's with ``traceId`` and ``spanId`` (``effects list``)."""

    effect: EffectRecord
    trace_id: str | None
    span_id: str | None

    def to_json(self) -> dict[str, Any]:
        return {**self.effect.to_json(), "traceId": self.trace_id, "spanId": self.span_id}


@dataclasses.dataclass(frozen=True, slots=True)
class StoredPlan:
    """The compiled plan a run executes, with each task's state (``inspect --graph``)."""

    run_id: str
    plan: Plan
    task_states: Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class AuditLog:
    """A run's audit events, oldest first, and the check of their hash chain (``audit``)."""

    run_id: str
    events: list[AuditEvent]
    chain: ChainReport

    def to_json(self) -> dict[str, Any]:
        events = [event.to_json() for event in self.events]
        return {"runId": self.run_id, "events": events, "chain": self.chain.to_json()}


@record(frozen=True, slots=True, config=CAMEL)
class RunReport(CamelRecord):
    """The whole stored run, as ``agentctl inspect --output json`` prints it.

    ``run``, each of ``tasks`` and each of ``effects`` are views joining several records
    (the task row with its times and trace ids, the effect with its reconciliations and
    trace ids), kept as their JSON documents (docs/cli.md, ``inspect``)."""

    run: Mapping[str, Any]
    tasks: list[Mapping[str, Any]]
    effects: list[Mapping[str, Any]]
    approvals: list[Approval]
    checkpoints: int
    budget: Any
    provider_sessions: list[Mapping[str, Any]]
    tool_calls: list[Mapping[str, Any]]
    artifacts: list[Mapping[str, Any]]
    retries: list[Mapping[str, Any]]
    audit: AuditCheck


@record(frozen=True, slots=True, config=CAMEL)
class TaskTotals(CamelRecord):
    """A run's tasks counted: how many are done (succeeded, failed, skipped or cancelled)
    of how many, and how many failed."""

    done: int
    total: int
    failed: int


@record(frozen=True, slots=True, config=CAMEL)
class RunTotals(CamelRecord):
    """A run in one line (the ``summary`` of ``roll``'s ``RunOutcome``): its state, how long
    it took, its tasks and effects, and the tokens and cost a provider reported (None when
    none did)."""

    state: str
    duration_seconds: float
    tasks: TaskTotals
    effects: int
    tokens: int | None = omitted_when(None)
    cost_usd: float | None = omitted_when(None)

    def text(self) -> str:
        """``succeeded in 1.2s: 3/3 tasks, 2 effects, 1,234 tokens, $0.001234``."""
        seconds = self.duration_seconds
        took = (
            f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
        )
        tasks = self.tasks
        parts = [f"{tasks.done}/{tasks.total} tasks"]
        if tasks.failed:
            parts[0] += f" ({tasks.failed} failed)"
        parts.append(f"{self.effects} effect" + ("" if self.effects == 1 else "s"))
        if self.tokens is not None:
            parts.append(amount("totalTokens", self.tokens))
        if self.cost_usd is not None:
            parts.append(amount("costMicrousd", round(self.cost_usd * 1_000_000)))
        verb = "in" if self.state == "succeeded" else "after"
        return f"{self.state} {verb} {took}: " + ", ".join(parts)


@record(frozen=True, slots=True, config=CAMEL)
class RunRecap(CamelRecord):
    """Where a run stands, as ``roll`` and ``resume`` report it once it stops: its
    ``totals`` and the commands that move it on (``next``; none for a succeeded run)."""

    totals: RunTotals
    next: list[NextStep]

    def hint(self) -> str | None:
        """The next steps as an error's hint, one ```command``: why`` per line (None when
        there are none): what a failed ``roll`` says to do next."""
        return render(self.next) if self.next else None
