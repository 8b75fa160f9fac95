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
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.rows import naive
from agentctl.store.sealing import unseal
from agentctl.store.statements import Statement, one_of, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

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
    values: dict[str, Any] = {"limit": max(1, limit)}
    if before is not None:
        values["before_at"], values["before_id"] = to_db(before[0]), before[1]
    if status:
        values["status"] = status
    if workflow:
        values["workflow"] = workflow
    if search:
        # ``!`` escapes: a backslash in a literal is spelt differently per dialect.
        escaped = search.replace("!", "!!").replace("%", "!%").replace("_", "!_")
        values["search"] = f"%{escaped}%"
    shape = (before is not None, bool(status), bool(workflow), bool(search))
    rows = _run_summaries(*shape).run(conn, **values)
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


@lru_cache(maxsize=16)
def _run_summaries(before: bool, status: bool, workflow: bool, search: bool) -> Statement:
    """The page of :func:`run_summaries` with the filters given (one statement per shape)."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, func, or_, select

        from agentctl.store.journal_tables import approvals
        from agentctl.store.run_tables import runs, tasks

        r, t, a = runs.alias("r"), tasks.alias("t"), approvals.alias("a")

        def count(table: Any, *conditions: Any) -> Any:
            return (
                select(func.count())
                .select_from(table)
                .where(table.c.run_id == r.c.id, *conditions)
                .scalar_subquery()
            )

        query = select(
            r.c.id,
            r.c.workflow_name,
            r.c.status,
            r.c.mode,
            r.c.created_at,
            r.c.updated_at,
            count(t),
            count(t, one_of(t.c.status, DONE_TASK_STATES)),
            count(a, a.c.status == "pending"),
            r.c.owner_id,
            r.c.owner_lease_expires_at,
        )
        if before:
            # The plain range on created_at is what the index walk starts from; the rest
            # breaks ties between runs created in the same microsecond (by id, as ordered).
            at: Any = bindparam("before_at")
            query = query.where(
                r.c.created_at <= at,
                or_(r.c.created_at < at, r.c.id < bindparam("before_id")),
            )
        if status:
            query = query.where(r.c.status == bindparam("status"))
        if workflow:
            query = query.where(r.c.workflow_name == bindparam("workflow"))
        if search:
            query = query.where(r.c.id.like(bindparam("search"), escape="!"))
        return query.order_by(r.c.created_at.desc(), r.c.id.desc()).limit(bindparam("limit"))

    return Statement(build, f"run_summaries{(before, status, workflow, search)}")


def workflow_names(conn: SqlRunner) -> list[str]:
    """Every workflow name that has a run, sorted (for the filter).

    A skip scan of the ``(workflow_name, created_at)`` index: one index seek per distinct
    name, however many runs each has (``SELECT DISTINCT`` would read every run's entry).
    """
    rows = _workflow_names.run(conn)
    return [str(row[0]) for row in rows]


@statement
def _workflow_names(_: SqlDialect) -> Executable:
    from sqlalchemy import func, select

    from agentctl.store.run_tables import runs

    names = select(func.min(runs.c.workflow_name).label("name")).cte("names", recursive=True)
    later = runs.alias("later")
    following = (
        select(func.min(later.c.workflow_name))
        .where(later.c.workflow_name > names.c.name)
        .scalar_subquery()
    )
    names = names.union_all(select(following).where(names.c.name.is_not(None)))
    return select(names.c.name).where(names.c.name.is_not(None))


def change_marker(conn: SqlRunner) -> str:
    """A string that differs whenever anything a page shows changed.

    Every transition (a run created, a task settled, an approval decided, an effect
    reconciled, a cancel) appends an audit event in its own transaction, so the newest
    event's rowid (an O(1) read of the table's b-tree) and the number of runs suffice.
    """
    row = _change_marker.run(conn).first()
    return "|".join("" if value is None else str(value) for value in row)


@statement
def _change_marker(sql: SqlDialect) -> Executable:
    from sqlalchemy import func, select

    from agentctl.store.run_tables import runs

    return select(sql.audit_position(), select(func.count()).select_from(runs).scalar_subquery())


def task_progress(
    conn: SqlRunner, run_id: str
) -> list[tuple[str, str, int, datetime | None, datetime | None]]:
    """``(task_id, status, attempt, started_at, finished_at)`` of a run's tasks, plan order."""
    rows = _task_progress.run(conn, run_id=run_id)
    return [(row[0], row[1], int(row[2]), naive(row[3]), naive(row[4])) for row in rows]


@statement
def _task_progress(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import tasks

    c = tasks.c
    return (
        select(c.task_id, c.status, c.attempt, c.started_at, c.finished_at)
        .where(c.run_id == bindparam("run_id"))
        .order_by(c.ordinal)
    )


def run_header(conn: SqlRunner, run_id: str) -> tuple[str, str | None] | None:
    """``(workflow_name, owner_id)`` without reading the plan; None for an unknown run."""
    row = _run_header.run(conn, run_id=run_id).first()
    return None if row is None else (str(row[0]), row[1])


@statement
def _run_header(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs

    return select(runs.c.workflow_name, runs.c.owner_id).where(runs.c.id == bindparam("run_id"))


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
    found: list[PausedTask] = []
    query = _paused_tasks_of_run if run_id is not None else _paused_tasks
    for row in query.run(conn, run_id=run_id):
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


def _paused_tasks_query(of_run: bool) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs, tasks

    r, t = runs.alias("r"), tasks.alias("t")
    query = (
        select(r.c.id, r.c.workflow_name, t.c.task_id, t.c.error_json, r.c.updated_at)
        .select_from(r.join(t, t.c.run_id == r.c.id))
        .where(r.c.status == "paused", t.c.status == "waiting_for_approval")
    )
    if of_run:
        query = query.where(r.c.id == bindparam("run_id"))
    return query.order_by(r.c.updated_at, r.c.id, t.c.ordinal)


_paused_tasks = Statement(lambda _: _paused_tasks_query(False), "paused_tasks")
_paused_tasks_of_run = Statement(lambda _: _paused_tasks_query(True), "paused_tasks_of_run")
