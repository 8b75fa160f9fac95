"""The daemon's reads: runs it must start (the parked runs it resumes are chosen by
:mod:`agentctl.store.adoption`, the rule workers share).

The query reads committed state only; whether a run is then actually executed is decided
by the run's ownership claim (:mod:`agentctl.store.ownership`), so two daemons reading the
same rows never execute one run twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctl.store.statements import statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["unstarted_scheduled_runs"]


def unstarted_scheduled_runs(conn: SqlRunner) -> list[tuple[str, str | None]]:
    """``(run id, owner id)`` of runs a schedule created that are still ``running``: either
    nothing executes them yet (no owner: the daemon stopped right after creating them) or
    the owner recorded may be gone; the caller checks the owner."""
    rows = _unstarted.run(conn)
    return [(str(row[0]), row[1]) for row in rows]


@statement
def _unstarted(_: SqlDialect) -> Executable:
    from sqlalchemy import select

    from agentctl.store.run_tables import runs
    from agentctl.store.schedule_tables import schedule_firings

    r, f = runs.alias("r"), schedule_firings.alias("f")
    return (
        select(r.c.id, r.c.owner_id)
        .select_from(f.join(r, r.c.id == f.c.run_id))
        .where(f.c.status == "started", r.c.status == "running")
        .order_by(r.c.created_at, r.c.id)
    )
