"""Provider session rows: where a task's conversation with its model provider stands.

One row per (run, task), replaced by each turn in its own transaction. A task that names
its session (``session: {name: …}``) stores the name beside it, so a later run can find
the newest session of that name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.records import check_format_version
from agentctl.store.sealing import seal, unseal
from agentctl.store.timestamps import from_db, to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["SessionRow", "find", "latest_for_task", "latest_named", "listed", "save", "sessions"]

_COLUMNS = "run_id, task_id, provider, state_json, session_name, updated_at, format_version"
_EARLIER_COLUMNS = (
    "s.run_id, s.task_id, s.provider, s.state_json, s.session_name, s.updated_at, s.format_version"
)
# Sessions of runs created before the given one, newest run first: what "latest" means, so
# a resumed run resolves the same source however many runs started since.
_EARLIER = (
    f"SELECT {_EARLIER_COLUMNS} FROM provider_sessions s JOIN runs r ON r.id = s.run_id "
    "WHERE r.created_at < (SELECT created_at FROM runs WHERE id = ?) AND s.run_id != ? "
)


@dataclass(frozen=True, slots=True)
class SessionRow:
    run_id: str
    task_id: str
    provider: str
    state_json: str
    name: str | None
    updated_at: datetime


def _row(conn: SqlRunner, row: Sequence[Any]) -> SessionRow:
    check_format_version("provider session", f"{row[0]}/{row[1]}", int(row[6]))
    return SessionRow(
        run_id=str(row[0]),
        task_id=str(row[1]),
        provider=str(row[2]),
        state_json=str(
            unseal(conn, "provider_sessions", "state_json", (str(row[0]), str(row[1])), row[3])
        ),
        name=row[4],
        updated_at=from_db(row[5]),
    )


def save(
    conn: SqlRunner,
    run_id: str,
    task_id: str,
    provider: str,
    state_json: str,
    now: datetime,
    name: str | None = None,
) -> None:
    """Insert or replace the task's session state."""
    conn.exec_driver_sql(
        "INSERT INTO provider_sessions (run_id, task_id, format_version, provider, "
        "state_json, updated_at, session_name) VALUES (?, ?, 1, ?, ?, ?, ?) "
        "ON CONFLICT (run_id, task_id) DO UPDATE SET provider = excluded.provider, "
        "state_json = excluded.state_json, updated_at = excluded.updated_at, "
        "session_name = excluded.session_name",
        (
            run_id,
            task_id,
            provider,
            seal(conn, "provider_sessions", "state_json", (run_id, task_id), state_json),
            to_db(now),
            name,
        ),
    )


def sessions(conn: SqlRunner, run_id: str) -> list[tuple[str, str, str]]:
    """``(task_id, provider, state_json)`` of a run's sessions, by task id."""
    rows = conn.exec_driver_sql(
        "SELECT task_id, provider, state_json FROM provider_sessions WHERE run_id = ?"
        " ORDER BY task_id",
        (run_id,),
    )
    return [
        (row[0], row[1], unseal(conn, "provider_sessions", "state_json", (run_id, row[0]), row[2]))
        for row in rows
    ]


def find(conn: SqlRunner, run_id: str, task_id: str) -> SessionRow | None:
    row = conn.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM provider_sessions WHERE run_id = ? AND task_id = ?",  # noqa: S608
        (run_id, task_id),
    ).first()
    return None if row is None else _row(conn, row)


def latest_for_task(conn: SqlRunner, task_id: str, *, before_run: str) -> SessionRow | None:
    """The session of ``task_id`` in the newest run created before ``before_run``."""
    row = conn.exec_driver_sql(
        _EARLIER + "AND s.task_id = ? ORDER BY r.created_at DESC, s.run_id DESC LIMIT 1",
        (before_run, before_run, task_id),
    ).first()
    return None if row is None else _row(conn, row)


def latest_named(conn: SqlRunner, name: str, *, before_run: str) -> SessionRow | None:
    """The session called ``name`` in the newest run created before ``before_run`` (the
    most recently updated, if that run holds several)."""
    row = conn.exec_driver_sql(
        _EARLIER + "AND s.session_name = ? "
        "ORDER BY r.created_at DESC, s.run_id DESC, s.updated_at DESC LIMIT 1",
        (before_run, before_run, name),
    ).first()
    return None if row is None else _row(conn, row)


def listed(
    conn: SqlRunner, *, run_id: str | None = None, name: str | None = None
) -> list[SessionRow]:
    """Sessions matching the filters given, newest first."""
    where: list[str] = []
    params: list[Any] = []
    if run_id is not None:
        where.append("run_id = ?")
        params.append(run_id)
    if name is not None:
        where.append("session_name = ?")
        params.append(name)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM provider_sessions {clause} "  # noqa: S608 - fixed identifiers
        "ORDER BY updated_at DESC, run_id DESC, task_id",
        tuple(params),
    )
    return [_row(conn, row) for row in rows]
