"""Guarded state changes: one conditional UPDATE per change, checked by its row count.

Every status change of a run, task, effect or approval goes through :func:`guarded_update`.
Its WHERE clause names the record *and* the prior states the transition table allows
(:mod:`agentctl.store.states`), so when another process changed the record first the
statement matches nothing and the writer gets :class:`StateConflictError` naming the
record and the state it found, instead of silently overwriting it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NoReturn

from agentctl.errors import StateConflictError
from agentctl.store.run_queue import notify_run
from agentctl.store.sealing import PAYLOAD_COLUMNS, seal, sealer_of
from agentctl.store.statements import Statement, one_of, statement
from agentctl.store.states import allowed_priors
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = ["close_live_parts", "driver_value", "guarded_update", "guarded_updates"]

#: (table, key columns) of each record kind whose status is guarded.
_RECORDS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "run": ("runs", ("id",)),
    "task": ("tasks", ("run_id", "task_id")),
    "effect": ("effects", ("id",)),
    "approval": ("approvals", ("id",)),
    "firing": ("schedule_firings", ("id",)),
}

#: Each kind's key parameters (``key_COLUMN``), in key order.
_KEY_NAMES: Mapping[str, tuple[str, ...]] = {
    kind: tuple(f"key_{column}" for column in key) for kind, (_, key) in _RECORDS.items()
}


def driver_value(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or value is None:
        return value  # most columns of a transition: nothing to convert
    if isinstance(value, datetime):
        return to_db(value)
    if isinstance(value, bool):
        return int(value)
    return value


def _table(kind: str) -> Any:
    from agentctl.store import tables

    return tables.metadata.tables[_RECORDS[kind][0]]


def _is_key(kind: str) -> Any:
    """The WHERE clause naming one record of ``kind`` (parameters ``key_COLUMN``)."""
    from sqlalchemy import and_, bindparam

    table = _table(kind)
    return and_(*(table.c[c] == bindparam(f"key_{c}") for c in _RECORDS[kind][1]))


@lru_cache(maxsize=512)
def _statement(kind: str, columns: tuple[str, ...], status: str | None) -> Statement:
    """The UPDATE of these columns, from the priors ``status`` allows (one per shape)."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, false, update

        table = _table(kind)
        query = update(table).where(_is_key(kind))
        if status is not None:
            priors = allowed_priors(kind, status)
            query = query.where(one_of(table.c.status, priors) if priors else false())
        return query.values(**{column: bindparam(column) for column in columns})

    return Statement(build, f"guarded_update({kind}, {columns}, {status})")


@lru_cache(maxsize=8)
def _status_of(kind: str) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import select

        return select(_table(kind).c.status).where(_is_key(kind))

    return Statement(build, f"status_of({kind})")


def guarded_update(conn: Any, kind: str, key: tuple[Any, ...], values: Mapping[str, Any]) -> None:
    """UPDATE one record; when ``values`` sets ``status``, only from an allowed prior state.

    ``conn`` is anything with ``exec_driver_sql`` (a SQLAlchemy connection or the
    executor's driver session). Column names come from our code, never from input.
    """
    status = values.get("status")
    update = _statement(kind, tuple(values), None if status is None else str(status))
    compiled = update.compiled(conn.dialect.name)
    params = _parameters(conn, kind, _sealed(conn, kind), key, values)
    result = conn.exec_driver_sql(compiled.text, compiled.parameters(params))
    if result.rowcount == 1:
        _notify(conn, kind, key, status)
        return
    _conflict(conn, kind, key, status)


def guarded_updates(
    conn: Any, kind: str, changes: Sequence[tuple[tuple[Any, ...], Mapping[str, Any]]]
) -> None:
    """:func:`guarded_update` of each ``(key, values)`` of ``changes``, with the same guard
    and the same error, in order; on SQLite the changes of one shape (the same columns
    and status) run as one ``executemany``, whose row count is the sum of its rows' (each
    key names one record, so every change matched exactly when the sum is their number).
    Nothing else in the transaction may read the records between the changes."""
    if len(changes) < 2 or conn.dialect.name != "sqlite":
        for key, values in changes:
            guarded_update(conn, kind, key, values)
        return
    sealed = _sealed(conn, kind)
    shapes: dict[tuple[tuple[str, ...], str | None], list[tuple[tuple[Any, ...], Any]]] = {}
    for key, values in changes:
        status = values.get("status")
        shape = (tuple(values), None if status is None else str(status))
        shapes.setdefault(shape, []).append((key, _parameters(conn, kind, sealed, key, values)))
    for (columns, status), rows in shapes.items():
        compiled = _statement(kind, columns, status).compiled(conn.dialect.name)
        result = conn.exec_driver_sql(
            compiled.text, [compiled.parameters(params) for _, params in rows]
        )
        if result.rowcount != len(rows):
            # Which one: the first whose record is missing or not in the new state.
            for key, _ in rows:
                found = _status_of(kind).run(conn, **_key_values(kind, key)).first()
                if found is None or (status is not None and found[0] != status):
                    _conflict(conn, kind, key, status)
            raise StateConflictError(
                f"{len(rows) - result.rowcount} of {len(rows)} {kind} records could not become "
                f"{status} (another process changed them first); nothing was written"
            )
        for key, _ in rows:
            _notify(conn, kind, key, status)


def _sealed(conn: Any, kind: str) -> Any:
    """The payload columns of ``kind``'s table sealed on this connection, or None."""
    sealed = PAYLOAD_COLUMNS.get(_RECORDS[kind][0])
    if sealed is not None and sealer_of(conn).active is None:
        return None  # encryption off: every payload column is stored as given
    return sealed


def _key_values(kind: str, key: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(_KEY_NAMES[kind], key, strict=True))


def _parameters(
    conn: Any, kind: str, sealed: Any, key: tuple[Any, ...], values: Mapping[str, Any]
) -> dict[str, Any]:
    table = _RECORDS[kind][0]
    params = _key_values(kind, key)
    for column, value in values.items():
        if sealed is not None and column in sealed.columns:
            params[column] = seal(conn, table, column, key, value)
        elif value is None or value.__class__ is str or value.__class__ is int:
            params[column] = value  # most columns of a transition: nothing to convert
        else:
            params[column] = driver_value(value)
    return params


def _notify(conn: Any, kind: str, key: tuple[Any, ...], status: Any) -> None:
    if kind == "run" and status is not None:
        notify_run(conn, str(key[0]))  # wakes `runs wait` and idle workers on commit
    elif kind == "approval" and status is not None:
        # A decision may let a worker adopt the parked run (store/adoption.py).
        notify_run(conn, f"approval:{key[0]}")


def _conflict(conn: Any, kind: str, key: tuple[Any, ...], status: Any) -> NoReturn:
    """Raise the error of a change of ``key`` that matched no record."""
    found = _status_of(kind).run(conn, **_key_values(kind, key)).first()
    name = "/".join(str(part) for part in key)
    if found is None:
        raise StateConflictError(f"{kind} {name} does not exist; nothing was written")
    raise StateConflictError(
        f"{kind} {name} is {found[0]}; it cannot become {status} (another process changed it "
        "first); nothing was written",
        hint="inspect the run with `agentctl inspect RUN_ID` to see what was recorded",
    )


def close_live_parts(conn: Any, run_id: str, now: datetime) -> None:
    """When a run ends, nothing of it stays live: tasks still running or waiting become
    ``cancelled`` and pending approvals and questions ``expired`` (they can no longer be
    answered). Both moves are in the transition tables."""
    stamp = to_db(now)
    _cancel_live_tasks.run(conn, finished_at=stamp, run_id=run_id)
    _expire_pending_approvals.run(conn, resolved_at=stamp, run_id=run_id)


@statement
def _cancel_live_tasks(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.run_tables import tasks

    live = ("running", "waiting_for_approval", "waiting_for_effect")
    return (
        update(tasks)
        .where(tasks.c.run_id == bindparam("run_id"), one_of(tasks.c.status, live))
        .values(status="cancelled", finished_at=bindparam("finished_at"))
    )


@statement
def _expire_pending_approvals(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.journal_tables import approvals

    return (
        update(approvals)
        .where(approvals.c.run_id == bindparam("run_id"), approvals.c.status == "pending")
        .values(
            status="expired",
            resolved_at=bindparam("resolved_at"),
            reason="the run ended before a decision",
        )
    )
