"""Reads of the condition decisions kept on task rows (``tasks.condition_json``).

The executor writes a task's decision with its transition (the generic task update of the
run log); this module is the one reader, for ``inspect`` and anything else that shows why
a task ran or was skipped.
"""

from __future__ import annotations

import json
from typing import Any

from agentctl.errors import PersistenceError
from agentctl.store.engine import SqlRunner

__all__ = ["task_conditions"]


def task_conditions(conn: SqlRunner, run_id: str) -> dict[str, dict[str, Any]]:
    """Task id -> ``{kind, expression, result, contextDigest, …}`` for every task of the
    run whose ``when`` or loop guard was evaluated."""
    rows = conn.exec_driver_sql(
        "SELECT task_id, condition_json FROM tasks "
        "WHERE run_id = ? AND condition_json IS NOT NULL ORDER BY ordinal",
        (run_id,),
    )
    out: dict[str, dict[str, Any]] = {}
    for task_id, text in rows:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise PersistenceError(
                f"task {task_id} of run {run_id} has a corrupt condition record: {exc}",
                code="store.corrupt",
                hint="the database was modified outside agentctl; keep a copy for investigation",
                run_id=run_id,
            ) from exc
        if isinstance(value, dict):
            out[str(task_id)] = value
    return out
