"""Following a run from another process (``agentctl watch``): what it looks like now, and
the audit events it wrote since the last look.

Each look is one read transaction; the run's owner keeps writing undisturbed (WAL).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentctl.engine.core.records import TERMINAL_RUN_STATES, load_run_state
from agentctl.engine.effects import journal
from agentctl.engine.effects.approvals import list_approvals
from agentctl.store import audit_repo, dashboard_repo
from agentctl.store.engine import Store
from agentctl.store.ownership import owner_alive

__all__ = ["IN_FLIGHT_EFFECT_STATES", "RunLook", "TaskLook", "look"]

IN_FLIGHT_EFFECT_STATES = ("requested", "started", "waiting_for_approval")


@dataclass(frozen=True, slots=True)
class TaskLook:
    task_id: str
    state: str
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunLook:
    run_id: str
    workflow: str
    state: str
    #: A process that is alive on this host owns the run (False when nobody or a dead one).
    owned: bool
    tasks: list[TaskLook]
    effects: list[dict[str, Any]]
    pending_approvals: list[str]
    output: Any
    error: Any
    events: list[dict[str, Any]]
    last_seq: int

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_RUN_STATES

    @property
    def parked(self) -> bool:
        return self.state == "paused"

    def count(self, *states: str) -> int:
        return sum(1 for task in self.tasks if task.state in states)


def look(store: Store, run_id: str, *, after_seq: int = 0) -> RunLook:
    """The run now, with the audit events after ``after_seq``; exit 5 for an unknown run."""
    with store.read() as conn:
        state, output, error = load_run_state(conn, run_id)
        header = dashboard_repo.run_header(conn, run_id)
        assert header is not None  # load_run_state refused an unknown run
        workflow, owner = header
        tasks = [TaskLook(*item) for item in dashboard_repo.task_progress(conn, run_id)]
        effects = [
            effect.to_json()
            for effect in journal.list_effects(conn, run_id)
            if effect.status in IN_FLIGHT_EFFECT_STATES
        ]
        pending = [a.id for a in list_approvals(conn, run_id, status="pending")]
        rows = audit_repo.events_after(conn, run_id, after_seq)
    events = [
        {
            "seq": event.seq,
            "kind": event.kind,
            "taskId": event.task_id,
            "effectId": event.effect_id,
            "at": event.created_at.isoformat(),
            "payload": json.loads(event.payload_json),
        }
        for event in rows
    ]
    return RunLook(
        run_id=run_id,
        workflow=workflow,
        state=state,
        owned=owner is not None and owner_alive(owner),
        tasks=tasks,
        effects=effects,
        pending_approvals=pending,
        output=output,
        error=error,
        events=events,
        last_seq=rows[-1].seq if rows else after_seq,
    )
