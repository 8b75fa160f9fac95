"""What ``agentctl gc`` removes from the runs family: old terminal runs, a batch at a time.

Deleting a run row removes its tasks, effects, approvals, checkpoints, audit events, tool
calls, budgets and artifact refs through ``ON DELETE CASCADE`` (foreign keys are on in
every store connection); runs derived from it keep their rows and lose only the link
(``SET NULL``). Each function runs in the caller's transaction; the caller keeps batches
small so no transaction holds the write lock for long.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from agentctl.store.statements import Statement, id_list, id_values, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["delete_runs", "old_terminal_runs"]


def old_terminal_runs(
    conn: SqlRunner,
    statuses: Sequence[str],
    updated_before: datetime,
    *,
    after: str | None = None,
    limit: int | None = None,
) -> list[str]:
    """Ids of runs in one of ``statuses`` last updated before ``updated_before``, by id;
    only ids greater than ``after`` when given, at most ``limit`` when given."""
    wanted = id_values(statuses, "status")
    listing = _old_terminal_runs(len(statuses), after is not None, limit is not None)
    rows = listing.run(conn, before=to_db(updated_before), after=after, limit=limit, **wanted)
    return [str(row[0]) for row in rows]


@lru_cache(maxsize=8)
def _old_terminal_runs(statuses: int, after: bool, limit: bool) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import runs

        c = runs.c
        query = select(c.id).where(
            id_list(c.status, statuses, "status"),
            c.updated_at < bindparam("before"),
        )
        if after:
            query = query.where(c.id > bindparam("after"))
        query = query.order_by(c.id)
        return query.limit(bindparam("limit")) if limit else query

    return Statement(build, f"old_terminal_runs({statuses}, {after}, {limit})")


def delete_runs(conn: SqlRunner, run_ids: Sequence[str]) -> None:
    """Delete the runs (and, by cascade, every row that belongs to them)."""
    _delete_run.run_many(conn, ({"run_id": run_id} for run_id in run_ids))


@statement
def _delete_run(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.run_tables import runs

    return delete(runs).where(runs.c.id == bindparam("run_id"))
