"""A run's compiled plan, one row per task, and the whole workflow document it came from.

The run row keeps the plan's header and the document without its task list (what the
executor reads on every resume); the rows here are written once, when the run is
created, and read by task id (the frontier a resume still has to run) or whole (plan
views, retry, fork, compensation). Every function runs in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["insert_records", "insert_workflow", "records", "workflow_document"]

#: Rows per multi-row INSERT (4 parameters each) and ids per ``IN (...)`` list: well
#: below SQLite's default limit of 32,766 bound parameters.
_CHUNK = 1_000


def insert_records(conn: SqlRunner, run_id: str, rows: Iterable[tuple[str, str]]) -> None:
    """One row per ``(task id, record JSON)``, numbered in the order given (plan order)."""
    values = [(run_id, task_id, ordinal, record) for ordinal, (task_id, record) in enumerate(rows)]
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        conn.exec_driver_sql(
            "INSERT INTO plan_tasks (run_id, task_id, ordinal, record_json) VALUES "  # noqa: S608
            + ", ".join("(?, ?, ?, ?)" for _ in chunk),
            tuple(value for row in chunk for value in row),
        )


def records(
    conn: SqlRunner, run_id: str, task_ids: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """``(task id, record JSON)`` of the given tasks (every task when None), in plan order."""
    if task_ids is None:
        rows = conn.exec_driver_sql(
            "SELECT task_id, record_json FROM plan_tasks WHERE run_id = ? ORDER BY ordinal",
            (run_id,),
        )
        return [(row[0], row[1]) for row in rows]
    found: list[tuple[int, str, str]] = []
    for start in range(0, len(task_ids), _CHUNK):
        chunk = tuple(task_ids[start : start + _CHUNK])
        marks = ", ".join("?" * len(chunk))
        found.extend(
            (row[0], row[1], row[2])
            for row in conn.exec_driver_sql(
                "SELECT ordinal, task_id, record_json FROM plan_tasks "  # noqa: S608
                f"WHERE run_id = ? AND task_id IN ({marks})",
                (run_id, *chunk),
            )
        )
    found.sort()
    return [(task_id, record) for _, task_id, record in found]


def insert_workflow(conn: SqlRunner, run_id: str, workflow_json: str) -> None:
    conn.exec_driver_sql(
        "INSERT INTO run_workflows (run_id, workflow_json) VALUES (?, ?)", (run_id, workflow_json)
    )


def workflow_document(conn: SqlRunner, run_id: str) -> str | None:
    """The whole workflow document of a run, None when the run has none stored apart."""
    row = conn.exec_driver_sql(
        "SELECT workflow_json FROM run_workflows WHERE run_id = ?", (run_id,)
    ).first()
    return None if row is None else str(row[0])
