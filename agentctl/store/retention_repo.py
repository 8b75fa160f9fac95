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
from typing import TYPE_CHECKING

from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["delete_runs", "old_terminal_runs"]

#: Ids per ``IN (...)`` list: below SQLite's default limit of 32,766 bound parameters.
_ID_CHUNK = 10_000


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
    marks = ", ".join("?" * len(statuses))
    sql = f"SELECT id FROM runs WHERE status IN ({marks}) AND updated_at < ?"  # noqa: S608
    params: list[object] = [*statuses, to_db(updated_before)]
    if after is not None:
        sql += " AND id > ?"
        params.append(after)
    sql += " ORDER BY id"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [str(row[0]) for row in conn.exec_driver_sql(sql, tuple(params))]


def delete_runs(conn: SqlRunner, run_ids: Sequence[str]) -> None:
    """Delete the runs (and, by cascade, every row that belongs to them)."""
    for start in range(0, len(run_ids), _ID_CHUNK):
        chunk = tuple(run_ids[start : start + _ID_CHUNK])
        marks = ", ".join("?" * len(chunk))
        conn.exec_driver_sql(f"DELETE FROM runs WHERE id IN ({marks})", chunk)  # noqa: S608
