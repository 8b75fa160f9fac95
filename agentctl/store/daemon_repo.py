"""The daemon's reads: runs it must start (the parked runs it resumes are chosen by
:mod:`agentctl.store.adoption`, the rule workers share).

The query reads committed state only; whether a run is then actually executed is decided
by the run's ownership claim (:mod:`agentctl.store.ownership`), so two daemons reading the
same rows never execute one run twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["unstarted_scheduled_runs"]


def unstarted_scheduled_runs(conn: SqlRunner) -> list[tuple[str, str | None]]:
    """``(run id, owner id)`` of runs a schedule created that are still ``running``: either
    nothing executes them yet (no owner: the daemon stopped right after creating them) or
    the owner recorded may be gone; the caller checks the owner."""
    rows = conn.exec_driver_sql(
        "SELECT r.id, r.owner_id FROM schedule_firings f JOIN runs r ON r.id = f.run_id "
        "WHERE f.status = 'started' AND r.status = 'running' ORDER BY r.created_at, r.id"
    )
    return [(str(row[0]), row[1]) for row in rows]
