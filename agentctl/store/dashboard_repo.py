"""Reads behind the dashboard (``agentctl ui``) and ``agentctl watch``: run summaries with
their task counts, a cheap marker that changes whenever anything a page shows does, and a
run's task progress with start and finish times.

Read-only; every function runs in the caller's (read) transaction, so a dashboard never
holds the write lock a running ``roll`` needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.rows import naive
from agentctl.store.sealing import unseal
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "PausedTask",
    "RunSummary",
    "change_marker",
    "paused_tasks",
    "run_header",
    "run_summaries",
    "task_progress",
    "workflow_names",
]

#: Task states that count as done in ``done/total``.
DONE_TASK_STATES = ("succeeded", "failed", "skipped", "cancelled")


@dataclass(frozen=True, slots=True)
class RunSummary:
    id: str
    workflow_name: str
    status: str
    mode: str
    created_at: datetime
    updated_at: datetime
    tasks_total: int
    tasks_done: int
    pending_approvals: int
    owner_id: str | None = None
    owner_lease_expires_at: datetime | None = None


def run_summaries(
    conn: SqlRunner,
    *,
    status: str | None = None,
    workflow: str | None = None,
    search: str | None = None,
    limit: int = 100,
    before: tuple[datetime, str] | None = None,
) -> list[RunSummary]:
    """Newest runs first, each with its task counts and pending approvals.

    One page of at most ``limit`` rows, older than ``before`` (``(created_at, id)`` of the
    last row of the previous page) when given: keyset paging walks the ``created_at``
    indexes, so page 50 costs what page 1 costs (no OFFSET scanning the skipped rows). The
    counts are correlated subqueries on the ``(run_id, status)`` indexes of tasks and
    approvals, evaluated only for the rows the page shows.
    """
    where: list[str] = []
    params: list[Any] = []
    if before is not None:
        # The plain range on created_at is what the index walk starts from; the rest
        # breaks ties between runs created in the same microsecond (by id, as ordered).
        where.append("r.created_at <= ? AND (r.created_at < ? OR r.id < ?)")
        params += [to_db(before[0]), to_db(before[0]), before[1]]
    if status:
        where.append("r.status = ?")
        params.append(status)
    if workflow:
        where.append("r.workflow_name = ?")
        params.append(workflow)
    if search:
        where.append("r.id LIKE ? ESCAPE '\\'")
        escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params.append(f"%{escaped}%")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    done = ", ".join(f"'{state}'" for state in DONE_TASK_STATES)
    params.append(max(1, limit))
    rows = conn.exec_driver_sql(
        "SELECT r.id, r.workflow_name, r.status, r.mode, r.created_at, r.updated_at, "
        "(SELECT COUNT(*) FROM tasks t WHERE t.run_id = r.id), "
        f"(SELECT COUNT(*) FROM tasks t WHERE t.run_id = r.id AND t.status IN ({done})), "
        "(SELECT COUNT(*) FROM approvals a WHERE a.run_id = r.id AND a.status = 'pending'), "
        "r.owner_id, r.owner_lease_expires_at "
        f"FROM runs r{clause} ORDER BY r.created_at DESC, r.id DESC LIMIT ?",  # noqa: S608
        tuple(params),
    )
    out: list[RunSummary] = []
    for row in rows:
        created, updated = naive(row[4]), naive(row[5])
        assert created is not None and updated is not None
        out.append(
            RunSummary(
                id=row[0],
                workflow_name=row[1],
                status=row[2],
                mode=row[3],
                created_at=created,
                updated_at=updated,
                tasks_total=int(row[6]),
                tasks_done=int(row[7]),
                pending_approvals=int(row[8]),
                owner_id=row[9],
                owner_lease_expires_at=naive(row[10]),
            )
        )
    return out


def workflow_names(conn: SqlRunner) -> list[str]:
    """Every workflow name that has a run, sorted (for the filter).

    A skip scan of the ``(workflow_name, created_at)`` index: one index seek per distinct
    name, however many runs each has (``SELECT DISTINCT`` would read every run's entry).
    """
    rows = conn.exec_driver_sql(
        "WITH RECURSIVE names(name) AS ("
        " SELECT MIN(workflow_name) FROM runs"
        " UNION ALL"
        " SELECT (SELECT MIN(workflow_name) FROM runs WHERE workflow_name > names.name)"
        " FROM names WHERE names.name IS NOT NULL"
        ") SELECT name FROM names WHERE name IS NOT NULL"
    )
    return [str(row[0]) for row in rows]


def change_marker(conn: SqlRunner) -> str:
    """A string that differs whenever anything a page shows changed.

    Every transition (a run created, a task settled, an approval decided, an effect
    reconciled, a cancel) appends an audit event in its own transaction, so the newest
    event's rowid (an O(1) read of the table's b-tree) and the number of runs suffice.
    """
    row = conn.exec_driver_sql(
        "SELECT (SELECT MAX(rowid) FROM audit_events), (SELECT COUNT(*) FROM runs)"
    ).first()
    return "|".join("" if value is None else str(value) for value in row)


def task_progress(
    conn: SqlRunner, run_id: str
) -> list[tuple[str, str, int, datetime | None, datetime | None]]:
    """``(task_id, status, attempt, started_at, finished_at)`` of a run's tasks, plan order."""
    rows = conn.exec_driver_sql(
        "SELECT task_id, status, attempt, started_at, finished_at FROM tasks "
        "WHERE run_id = ? ORDER BY ordinal",
        (run_id,),
    )
    return [(row[0], row[1], int(row[2]), naive(row[3]), naive(row[4])) for row in rows]


def run_header(conn: SqlRunner, run_id: str) -> tuple[str, str | None] | None:
    """``(workflow_name, owner_id)`` without reading the plan; None for an unknown run."""
    row = conn.exec_driver_sql(
        "SELECT workflow_name, owner_id FROM runs WHERE id = ?", (run_id,)
    ).first()
    return None if row is None else (str(row[0]), row[1])


@dataclass(frozen=True, slots=True)
class PausedTask:
    run_id: str
    workflow_name: str
    task_id: str
    message: str | None
    paused_at: datetime | None


def paused_tasks(conn: SqlRunner, run_id: str | None = None) -> list[PausedTask]:
    """Tasks of paused runs that wait at a ``builtin.pause`` step (their error code is
    ``task.paused``), oldest parked first; of one run when ``run_id`` is given."""
    statement = (
        "SELECT r.id, r.workflow_name, t.task_id, t.error_json, r.updated_at FROM runs r "
        "JOIN tasks t ON t.run_id = r.id WHERE r.status = 'paused' "
        "AND t.status = 'waiting_for_approval'"
    )
    params: tuple[Any, ...] = ()
    if run_id is not None:
        statement += " AND r.id = ?"
        params = (run_id,)
    found: list[PausedTask] = []
    for row in conn.exec_driver_sql(statement + " ORDER BY r.updated_at, r.id, t.ordinal", params):
        stored = unseal(conn, "tasks", "error_json", (row[0], row[2]), row[3])
        error = json.loads(stored) if stored else {}
        if not isinstance(error, dict) or error.get("code") != "task.paused":
            continue
        message = error.get("message")
        found.append(
            PausedTask(
                str(row[0]),
                str(row[1]),
                str(row[2]),
                message if isinstance(message, str) else None,
                naive(row[4]),
            )
        )
    return found
