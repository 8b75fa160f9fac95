"""The runs list (``agentctl runs list``): each run with its task progress and pending
approvals, read from the store alone.

It lives apart from :mod:`agentctl.engine.operations` so that listing runs loads the
store and nothing of the executor or the compiler (the command's start-up cost).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store import approvals_repo, runs_repo, tasks_repo

if TYPE_CHECKING:
    from agentctl.store.engine import Store

__all__ = ["list_runs"]

_DONE_TASK_STATES = ("succeeded", "failed", "skipped", "cancelled")


def list_runs(
    store: Store,
    *,
    status: str | None = None,
    workflow: str | None = None,
    limit: int = 50,
    schedule: str | None = None,
    since: datetime | None = None,
) -> list[dict[str, Any]]:
    """Runs newest first, each with its task progress and pending approvals."""
    with store.read() as conn:
        found = []
        for row in runs_repo.list_runs(
            conn,
            status=status,
            workflow=workflow,
            limit=max(1, limit),
            since=since,
            schedule=schedule,
        ):
            counts = tasks_repo.state_counts(conn, row.id)
            waiting = approvals_repo.count(conn, row.id, status="pending")
            found.append(
                {
                    "runId": row.id,
                    "workflow": row.workflow_name,
                    "state": row.status,
                    "mode": row.mode,
                    "sourceRunId": row.source_run_id,
                    "createdAt": row.created_at.isoformat(),
                    "updatedAt": row.updated_at.isoformat(),
                    "tasks": {
                        "done": sum(counts.get(s, 0) for s in _DONE_TASK_STATES),
                        "total": sum(counts.values()),
                    },
                    "waitingApprovals": waiting,
                }
            )
        return found
