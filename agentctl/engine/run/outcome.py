"""What a caller gives the executor and what it gets back."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic.dataclasses import dataclass as record

from agentctl.engine.actions.agent import ProviderPool
from agentctl.engine.core.faults import Faults
from agentctl.engine.core.records import TERMINAL_RUN_STATES, load_run_state
from agentctl.engine.effects.gate import InteractiveApprover
from agentctl.signals import PAUSE_PREFIX, EffectBlocked
from agentctl.store import ownership
from agentctl.store.engine import Store
from agentctl.typed_records import CAMEL, CamelRecord, omitted_when, omitted_when_empty

__all__ = [
    "EventSink",
    "ExecutionOptions",
    "RunDocument",
    "RunOutcome",
    "TaskOutcome",
    "finished_outcome",
]

EventSink = Callable[[str, dict[str, Any]], None]
Sleep = Callable[[float], Any]


@dataclass
class ExecutionOptions:
    check: bool = False
    diff: bool = False
    approver: InteractiveApprover | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    faults: Faults = field(default_factory=Faults)
    owner_id: str = field(default_factory=ownership.new_owner_id)
    events: EventSink | None = None
    sleep: Sleep = asyncio.sleep
    cancel_poll_seconds: float = 0.2
    workspace: str | None = None
    pool: ProviderPool = field(default_factory=ProviderPool)
    # A worker's engine.task_claims.TaskClaims: parallel batches spread over workers.
    task_claims: Any = None


@record(frozen=True, slots=True, config=CAMEL)
class RunDocument(CamelRecord):
    """Where a run stopped, as ``roll --output json`` prints it (and
    :meth:`agentctl.RunResult.to_json` returns): what is empty or unset is left out."""

    run_id: str
    state: str
    output: Any
    error: dict[str, Any] | None = omitted_when(None)
    pending_approvals: list[str] = omitted_when_empty()
    paused_tasks: list[str] = omitted_when_empty()
    uncertain_effects: list[dict[str, Any]] = omitted_when_empty()
    changed_files: list[dict[str, Any]] | None = omitted_when(None)
    """For a dry run: the files the run changed in its throwaway copy."""


@dataclass
class RunOutcome:
    run_id: str
    state: str
    # Out of the repr: asyncio formats a finished task's result when it restores signal
    # handlers, and a long run's output is every task's.
    output: Any = field(default=None, repr=False)
    error: dict[str, Any] | None = None
    approvals: list[str] = field(default_factory=list)
    uncertain_effects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pending_approvals(self) -> list[str]:
        """Approvals and questions a person must answer (pause steps excluded)."""
        return [a for a in self.approvals if not a.startswith(PAUSE_PREFIX)]

    @property
    def paused_tasks(self) -> list[str]:
        """Tasks of ``builtin.pause`` that parked the run until ``agentctl resume``."""
        return [a[len(PAUSE_PREFIX) :] for a in self.approvals if a.startswith(PAUSE_PREFIX)]

    def to_json(self) -> dict[str, Any]:
        """The :class:`RunDocument` of this outcome."""
        document = RunDocument(
            self.run_id,
            self.state,
            self.output,
            self.error,
            self.pending_approvals,
            self.paused_tasks,
            self.uncertain_effects,
        )
        return document.to_json()


def finished_outcome(store: Store, run_id: str) -> RunOutcome | None:
    """The stored outcome of a run that already finished, without starting an executor:
    re-submitting a completed run answers from one indexed read (at the driver)."""
    with store.driver_session() as session, session.read() as conn:
        status, output, error = load_run_state(conn, run_id)
    if status in TERMINAL_RUN_STATES:
        return RunOutcome(run_id, status, output, error)
    return None


@dataclass
class TaskOutcome:
    """How one task's turn in a batch ended (before its transition commits)."""

    status: str
    attempt: int
    output: Any = None
    has_output: bool = False
    error: dict[str, Any] | None = None
    memory_delta: dict[str, Any] = field(default_factory=dict)
    stops_run: bool = False
    approval: str | None = None
    blocked: EffectBlocked | None = None
    input_digest: str | None = None
    effect_ids: list[str] = field(default_factory=list)
    artifacts: list[Any] = field(default_factory=list)
    # The `when` or loop-guard decision that let the task run or skipped it.
    condition: dict[str, Any] | None = None
    # The output's canonical JSON: made by the attempt (reusing the texts of the parts it
    # already encoded) or, when it did not, by the transition that writes it to the row.
    output_json: str | None = None
