"""Provider session rows: where a task's conversation with its model provider stands.

One row per (run, task), replaced by each turn in its own transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["save", "sessions"]


def save(
    conn: SqlRunner, run_id: str, task_id: str, provider: str, state_json: str, now: datetime
) -> None:
    """Insert or replace the task's session state."""
    conn.exec_driver_sql(
        "INSERT INTO provider_sessions (run_id, task_id, format_version, provider, "
        "state_json, updated_at) VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT (run_id, task_id) "
        "DO UPDATE SET provider = excluded.provider, state_json = excluded.state_json, "
        "updated_at = excluded.updated_at",
        (run_id, task_id, provider, state_json, to_db(now)),
    )


def sessions(conn: SqlRunner, run_id: str) -> list[tuple[str, str, str]]:
    """``(task_id, provider, state_json)`` of a run's sessions, by task id."""
    rows = conn.exec_driver_sql(
        "SELECT task_id, provider, state_json FROM provider_sessions WHERE run_id = ?"
        " ORDER BY task_id",
        (run_id,),
    )
    return [(row[0], row[1], row[2]) for row in rows]
