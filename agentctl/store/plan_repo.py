"""A run's compiled plan, one row per task, and the whole workflow document it came from.

The run row keeps the plan's header and the document without its task list (what the
executor reads on every resume); the rows here are written once, when the run is
created, and read by task id (the frontier a resume still has to run) or whole (plan
views, retry, fork, compensation). Every function runs in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.statements import Statement, padded, statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["insert_records", "insert_workflow", "records", "workflow_document"]

#: Ids per ``IN (...)`` list: a power of two (statements.padded), well below SQLite's
#: default limit of 32,766 bound parameters.
_CHUNK = 1_024


def insert_records(conn: SqlRunner, run_id: str, rows: Iterable[tuple[str, str]]) -> None:
    """One row per ``(task id, record JSON)``, numbered in the order given (plan order)."""
    _insert_record.run_many(
        conn,
        (
            {"run_id": run_id, "task_id": task_id, "ordinal": ordinal, "record_json": record}
            for ordinal, (task_id, record) in enumerate(rows)
        ),
    )


@statement
def _insert_record(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.run_tables import plan_tasks

    given = ("run_id", "task_id", "ordinal", "record_json")
    return insert(plan_tasks).values(**{name: bindparam(name) for name in given})


def records(
    conn: SqlRunner, run_id: str, task_ids: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """``(task id, record JSON)`` of the given tasks (every task when None), in plan order."""
    if task_ids is None:
        rows = _all_records.run(conn, run_id=run_id)
        return [(row[0], row[1]) for row in rows]
    found: list[tuple[int, str, str]] = []
    for start in range(0, len(task_ids), _CHUNK):
        chunk = padded(task_ids[start : start + _CHUNK])
        ids = {f"task_id_{n}": task_id for n, task_id in enumerate(chunk)}
        found.extend(
            (row[0], row[1], row[2])
            for row in _records_of(len(chunk)).run(conn, run_id=run_id, **ids)
        )
    found.sort()
    return [(task_id, record) for _, task_id, record in found]


@statement
def _all_records(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import plan_tasks

    c = plan_tasks.c
    return (
        select(c.task_id, c.record_json).where(c.run_id == bindparam("run_id")).order_by(c.ordinal)
    )


@lru_cache(maxsize=16)
def _records_of(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import plan_tasks

        c = plan_tasks.c
        ids: list[Any] = [bindparam(f"task_id_{n}") for n in range(count)]
        return select(c.ordinal, c.task_id, c.record_json).where(
            c.run_id == bindparam("run_id"), c.task_id.in_(ids)
        )

    return Statement(build, f"records_of({count})")


def insert_workflow(conn: SqlRunner, run_id: str, workflow_json: str) -> None:
    _insert_workflow.run(conn, run_id=run_id, workflow_json=workflow_json)


@statement
def _insert_workflow(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.run_tables import run_workflows

    return insert(run_workflows).values(
        run_id=bindparam("run_id"), workflow_json=bindparam("workflow_json")
    )


def workflow_document(conn: SqlRunner, run_id: str) -> str | None:
    """The whole workflow document of a run, None when the run has none stored apart."""
    row = _workflow_document.run(conn, run_id=run_id).first()
    return None if row is None else str(row[0])


@statement
def _workflow_document(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import run_workflows

    c = run_workflows.c
    return select(c.workflow_json).where(c.run_id == bindparam("run_id"))
