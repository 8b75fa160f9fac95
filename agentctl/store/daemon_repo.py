"""The daemon's reads: runs it must start or resume.

Both queries read committed state only; whether a run is then actually executed is decided
by the run's ownership claim (:mod:`agentctl.store.ownership`), so two daemons reading the
same rows never execute one run twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["answered_parked_runs", "unstarted_scheduled_runs"]


def unstarted_scheduled_runs(conn: SqlRunner) -> list[tuple[str, str | None]]:
    """``(run id, owner id)`` of runs a schedule created that are still ``running``: either
    nothing executes them yet (no owner: the daemon stopped right after creating them) or
    the owner recorded may be gone; the caller checks the owner."""
    rows = conn.exec_driver_sql(
        "SELECT r.id, r.owner_id FROM schedule_firings f JOIN runs r ON r.id = f.run_id "
        "WHERE f.status = 'started' AND r.status = 'running' ORDER BY r.created_at, r.id"
    )
    return [(str(row[0]), row[1]) for row in rows]


def answered_parked_runs(conn: SqlRunner) -> list[tuple[str, str | None, str | None]]:
    """``(run id, owner id, workflow file)`` of parked runs that wait for nobody any more:
    no approval or question of theirs is pending, and one was decided after they parked."""
    rows = conn.exec_driver_sql(
        "SELECT r.id, r.owner_id, r.workflow_file FROM runs r WHERE r.status = 'paused' "
        "AND NOT EXISTS (SELECT 1 FROM approvals p WHERE p.run_id = r.id "
        "AND p.status = 'pending') "
        "AND EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.id "
        "AND a.status IN ('approved', 'rejected', 'answered') "
        "AND a.resolved_at >= r.updated_at) ORDER BY r.updated_at, r.id"
    )
    return [(str(row[0]), row[1], row[2]) for row in rows]
