"""Provider session rows: where a task's conversation with its model provider stands.

One row per (run, task), replaced by each turn in its own transaction. A task that names
its session (``session: {name: …}``) stores the name beside it, so a later run can find
the newest session of that name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.records import check_format_version
from agentctl.store.sealing import seal, unseal
from agentctl.store.statements import Statement, columns, statement
from agentctl.store.timestamps import from_db, to_db

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["SessionRow", "find", "latest_for_task", "latest_named", "listed", "save", "sessions"]

_COLUMNS = (
    "run_id",
    "task_id",
    "provider",
    "state_json",
    "session_name",
    "updated_at",
    "format_version",
)


def _earlier() -> tuple[Select[Any], Any, Any]:
    """Sessions of runs created before the run ``before_run``, with the session table and
    the run table it joins: "latest" means newest such run, so a resumed run resolves the
    same source however many runs started since."""
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import provider_sessions, runs

    s, r = provider_sessions.alias("s"), runs.alias("r")
    created = (
        select(runs.c.created_at).where(runs.c.id == bindparam("before_run")).scalar_subquery()
    )
    query = (
        select(*columns(s, _COLUMNS))
        .join(r, r.c.id == s.c.run_id)
        .where(r.c.created_at < created, s.c.run_id != bindparam("before_run"))
    )
    return query, s, r


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
    _save.run(
        conn,
        run_id=run_id,
        task_id=task_id,
        provider=provider,
        state_json=seal(conn, "provider_sessions", "state_json", (run_id, task_id), state_json),
        updated_at=to_db(now),
        session_name=name,
    )


@statement
def _save(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.run_tables import provider_sessions

    replaced = ("provider", "state_json", "updated_at", "session_name")
    new = sql.insert(provider_sessions).values(
        run_id=bindparam("run_id"),
        task_id=bindparam("task_id"),
        format_version=1,
        **{name: bindparam(name) for name in replaced},
    )
    return new.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=["run_id", "task_id"],
        set_={name: new.excluded[name] for name in replaced},
    )


def sessions(conn: SqlRunner, run_id: str) -> list[tuple[str, str, str]]:
    """``(task_id, provider, state_json)`` of a run's sessions, by task id."""
    rows = _sessions.run(conn, run_id=run_id)
    return [
        (row[0], row[1], unseal(conn, "provider_sessions", "state_json", (run_id, row[0]), row[2]))
        for row in rows
    ]


@statement
def _sessions(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import provider_sessions

    c = provider_sessions.c
    return (
        select(c.task_id, c.provider, c.state_json)
        .where(c.run_id == bindparam("run_id"))
        .order_by(c.task_id)
    )


def find(conn: SqlRunner, run_id: str, task_id: str) -> SessionRow | None:
    row = _find.run(conn, run_id=run_id, task_id=task_id).first()
    return None if row is None else _row(conn, row)


@statement
def _find(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import provider_sessions

    c = provider_sessions.c
    return select(*columns(provider_sessions, _COLUMNS)).where(
        c.run_id == bindparam("run_id"), c.task_id == bindparam("task_id")
    )


def latest_for_task(conn: SqlRunner, task_id: str, *, before_run: str) -> SessionRow | None:
    """The session of ``task_id`` in the newest run created before ``before_run``."""
    row = _latest_for_task.run(conn, before_run=before_run, task_id=task_id).first()
    return None if row is None else _row(conn, row)


@statement
def _latest_for_task(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    query, s, r = _earlier()
    return (
        query.where(s.c.task_id == bindparam("task_id"))
        .order_by(r.c.created_at.desc(), s.c.run_id.desc())
        .limit(1)
    )


def latest_named(conn: SqlRunner, name: str, *, before_run: str) -> SessionRow | None:
    """The session called ``name`` in the newest run created before ``before_run`` (the
    most recently updated, if that run holds several)."""
    row = _latest_named.run(conn, before_run=before_run, name=name).first()
    return None if row is None else _row(conn, row)


@statement
def _latest_named(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    query, s, r = _earlier()
    return (
        query.where(s.c.session_name == bindparam("name"))
        .order_by(r.c.created_at.desc(), s.c.run_id.desc(), s.c.updated_at.desc())
        .limit(1)
    )


def listed(
    conn: SqlRunner, *, run_id: str | None = None, name: str | None = None
) -> list[SessionRow]:
    """Sessions matching the filters given, newest first."""
    rows = _listed(run_id is not None, name is not None).run(conn, run_id=run_id, name=name)
    return [_row(conn, row) for row in rows]


@lru_cache(maxsize=4)
def _listed(of_run: bool, named: bool) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import provider_sessions

        c = provider_sessions.c
        query = select(*columns(provider_sessions, _COLUMNS))
        if of_run:
            query = query.where(c.run_id == bindparam("run_id"))
        if named:
            query = query.where(c.session_name == bindparam("name"))
        return query.order_by(c.updated_at.desc(), c.run_id.desc(), c.task_id)

    return Statement(build, f"listed({of_run}, {named})")
