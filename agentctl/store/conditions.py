"""Reads of the condition decisions kept on task rows (``tasks.condition_json``).

The executor writes a task's decision with its transition (the generic task update of the
run log); this module is the one reader, for ``inspect`` and anything else that shows why
a task ran or was skipped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentctl.errors import PersistenceError
from agentctl.store.runner import SqlRunner
from agentctl.store.statements import statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = ["task_conditions"]


def task_conditions(conn: SqlRunner, run_id: str) -> dict[str, dict[str, Any]]:
    """Task id -> ``{kind, expression, result, contextDigest, …}`` for every task of the
    run whose ``when`` or loop guard was evaluated."""
    rows = _conditions.run(conn, run_id=run_id)
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


@statement
def _conditions(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import tasks

    c = tasks.c
    return (
        select(c.task_id, c.condition_json)
        .where(c.run_id == bindparam("run_id"), c.condition_json.is_not(None))
        .order_by(c.ordinal)
    )
