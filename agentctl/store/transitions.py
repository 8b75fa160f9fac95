"""Guarded state changes: one conditional UPDATE per change, checked by its row count.

Every status change of a run, task, effect or approval goes through :func:`guarded_update`.
Its WHERE clause names the record *and* the prior states the transition table allows
(:mod:`agentctl.store.states`), so when another process changed the record first the
statement matches nothing and the writer gets :class:`StateConflictError` naming the
record and the state it found, instead of silently overwriting it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from agentctl.errors import StateConflictError
from agentctl.store.run_queue import notify_run
from agentctl.store.sealing import PAYLOAD_COLUMNS, seal
from agentctl.store.states import allowed_priors
from agentctl.store.timestamps import to_db

__all__ = ["close_live_parts", "driver_value", "guarded_update"]

#: (table, key columns) of each record kind whose status is guarded.
_RECORDS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "run": ("runs", ("id",)),
    "task": ("tasks", ("run_id", "task_id")),
    "effect": ("effects", ("id",)),
    "approval": ("approvals", ("id",)),
    "firing": ("schedule_firings", ("id",)),
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


@lru_cache(maxsize=512)
def _statement(
    kind: str, columns: tuple[str, ...], status: str | None
) -> tuple[str, tuple[str, ...]]:
    """The UPDATE text for these columns (built once per shape) and the allowed priors."""
    table, key_columns = _RECORDS[kind]
    assignments = ", ".join(f"{column} = ?" for column in columns)
    where = " AND ".join(f"{column} = ?" for column in key_columns)
    priors: tuple[str, ...] = ()
    if status is not None:
        priors = allowed_priors(kind, status)
        where += f" AND status IN ({', '.join('?' for _ in priors) or 'NULL'})"
    return f"UPDATE {table} SET {assignments} WHERE {where}", priors  # noqa: S608


def guarded_update(conn: Any, kind: str, key: tuple[Any, ...], values: Mapping[str, Any]) -> None:
    """UPDATE one record; when ``values`` sets ``status``, only from an allowed prior state.

    ``conn`` is anything with ``exec_driver_sql`` (a SQLAlchemy connection or the
    executor's driver session). Column names come from our code, never from input.
    """
    status = values.get("status")
    statement, priors = _statement(kind, tuple(values), None if status is None else str(status))
    table, _ = _RECORDS[kind]
    sealed = PAYLOAD_COLUMNS.get(table)
    params: list[Any] = [
        seal(conn, table, column, key, value)
        if sealed is not None and column in sealed.columns
        else driver_value(value)
        for column, value in values.items()
    ]
    params.extend(key)
    params.extend(priors)
    result = conn.exec_driver_sql(statement, tuple(params))
    if result.rowcount == 1:
        if kind == "run" and status is not None:
            notify_run(conn, str(key[0]))  # wakes `runs wait` and idle workers on commit
        elif kind == "approval" and status is not None:
            # A decision may let a worker adopt the parked run (store/adoption.py).
            notify_run(conn, f"approval:{key[0]}")
        return
    key_columns = _RECORDS[kind][1]
    found = conn.exec_driver_sql(
        f"SELECT status FROM {table} WHERE {' AND '.join(f'{c} = ?' for c in key_columns)}",  # noqa: S608
        tuple(key),
    ).first()
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
    conn.exec_driver_sql(
        "UPDATE tasks SET status = 'cancelled', finished_at = ? WHERE run_id = ? AND status IN "
        "('running', 'waiting_for_approval', 'waiting_for_effect')",
        (stamp, run_id),
    )
    conn.exec_driver_sql(
        "UPDATE approvals SET status = 'expired', resolved_at = ?, reason = "
        "'the run ended before a decision' WHERE run_id = ? AND status = 'pending'",
        (stamp, run_id),
    )
