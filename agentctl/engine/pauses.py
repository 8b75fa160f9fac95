"""Pause steps as something a person answers: which runs wait at a ``builtin.pause`` step,
and the record that someone let one go on.

A pause has no approval row: the run parks with its pause task ``waiting_for_approval``
(error code ``task.paused``) and the next ``agentctl resume`` lets it succeed. Releasing it
from the dashboard appends a ``pause.released`` audit event naming the actor and the tasks,
then the caller starts that resume; the event is what says who let the run go on.
"""

from __future__ import annotations

from typing import Any

from agentctl import hints
from agentctl.engine.core.records import RunLog, load_run
from agentctl.errors import BlockedError, UsageError
from agentctl.ids import Clock
from agentctl.store import dashboard_repo
from agentctl.store.engine import Store
from agentctl.store.ownership import holder_gone
from agentctl.store.timestamps import to_iso

__all__ = ["paused_runs", "release_pause"]


def paused_runs(store: Store, run_id: str | None = None) -> list[dict[str, Any]]:
    """Every task that waits at a pause step, oldest parked first (of one run if given)."""
    with store.read() as conn:
        found = dashboard_repo.paused_tasks(conn, run_id)
    return [
        {
            "runId": item.run_id,
            "workflow": item.workflow_name,
            "taskId": item.task_id,
            "message": item.message,
            "pausedAt": to_iso(item.paused_at) if item.paused_at is not None else None,
        }
        for item in found
    ]


def release_pause(
    store: Store, run_id: str, *, actor: str, reason: str | None, clock: Clock
) -> dict[str, Any]:
    """Record that ``actor`` lets the run go on past its pause steps (audit event
    ``pause.released``); the caller then resumes it. Refused for a run that is not parked at
    a pause, or that a live process still owns."""
    now = clock.now()
    with store.write() as conn:
        run = load_run(conn, run_id)
        tasks = [t.task_id for t in dashboard_repo.paused_tasks(conn, run_id)]
        if run.status != "paused" or not tasks:
            raise UsageError(
                f"run {run_id} is {run.status}, not parked at a pause step",
                hint="only a run that waits at a builtin.pause step can be resumed this way; "
                f"see what it waits for with {hints.quoted(hints.inspect(run_id))}",
            )
        if not holder_gone(run.owner_id, run.owner_lease_expires_at, now):
            raise BlockedError(
                f"run {run_id} is still owned by a live process ({run.owner_id})",
                hint="wait for that process to end, or cancel it",
            )
        RunLog.open(conn, run_id).event(
            conn,
            "pause.released",
            {"tasks": tasks, "actor": actor, "reason": reason},
            now=now,
        )
    return {"runId": run_id, "tasks": tasks, "actor": actor}
