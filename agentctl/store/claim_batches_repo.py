"""A run owner's batch of task claims (PostgreSQL workers): publishing it, reading what its
claims became, withdrawing it (docs/postgresql.md, "Task-level claims"; a worker's side,
claiming the rows, is :mod:`agentctl.store.task_claims_repo`, which also exports every
name of this module).

The owner **publishes** each task of a parallel batch as ``ready``, with the vars it runs
with and a ``basis`` digest of what it was decided from (inside the owner's fenced write
transaction: an owner that lost its run publishes nothing); it reads the outcomes
(:func:`claims_done`, :func:`claim_states`), commits the batch in plan order and
**removes** the rows (:func:`remove_claims`).

Publishing again with the same basis keeps the row as it is (an owner that took the run
over finds the outcomes a live worker produced); a different basis replaces it and bumps
the token, fencing out whoever held the old claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import run_queue
from agentctl.store.dialect import sql_dialect
from agentctl.store.statements import Statement, id_list, id_values, padded, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = [
    "CHUNK",
    "Published",
    "claim_states",
    "claims_done",
    "publish",
    "published_task_ids",
    "remove_claims",
]


@dataclass(frozen=True, slots=True)
class Published:
    task_id: str
    basis: str
    payload_json: str


#: Ids per ``IN (...)`` list: a power of two (statements.padded), well below both
#: dialects' limits on bound parameters. A batch of at most this many tasks is counted by
#: :func:`claims_done` in one statement.
CHUNK = 512
_CHUNK = CHUNK


def publish(conn: Any, run_id: str, items: Sequence[Published], now: datetime) -> None:
    """Make ``items`` claimable (see the module docstring for an existing row)."""
    existing = {
        str(row[0]): (str(row[1]), int(row[2])) for row in _published.run(conn, run_id=run_id)
    }
    stamp = to_db(now)
    new: list[Published] = []
    for item in items:
        found = existing.get(item.task_id)
        if found is not None and found[0] == item.basis:
            continue
        if found is None:
            new.append(item)
            continue
        _republish.run(conn, **_row_values(run_id, item, stamp))
    if new and sql_dialect(conn.dialect.name).one_statement_claims:
        _publish_all.run(
            conn,
            run_id=run_id,
            task_ids=[item.task_id for item in new],
            bases=[item.basis for item in new],
            payloads=[item.payload_json for item in new],
            stamp=stamp,
        )
    else:
        for item in new:
            _publish.run(conn, **_row_values(run_id, item, stamp))
    run_queue.notify_run(conn, f"tasks:{run_id}")


def _row_values(run_id: str, item: Published, stamp: str) -> dict[str, Any]:
    """A published row's parameters, for its INSERT or its replacing UPDATE."""
    return {
        "run_id": run_id,
        "task_id": item.task_id,
        "basis": item.basis,
        "payload_json": item.payload_json,
        "stamp": stamp,
    }


@statement
def _published(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    return select(c.task_id, c.basis, c.token).where(c.run_id == bindparam("run_id"))


@statement
def _republish(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, null, update

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    return (
        update(task_claims)
        .where(c.run_id == bindparam("run_id"), c.task_id == bindparam("task_id"))
        .values(
            state="ready",
            basis=bindparam("basis"),
            payload_json=bindparam("payload_json"),
            token=c.token + 1,
            worker=null(),
            lease_expires_at=null(),
            ready_at=bindparam("stamp"),
            started_at=null(),
            finished_at=null(),
            outcome_json=null(),
        )
    )


@statement
def _publish_all(sql: SqlDialect) -> Executable:
    """PostgreSQL: every new row of a batch in one statement, the ids, bases and payloads
    given as three arrays that ``unnest`` pairs up (one execution and one round trip, where
    an ``INSERT`` per task took as many: 400 for a 400-task fan-out). Its text does not
    depend on the batch's size. SQLite, which never publishes, gets one row's insert."""
    if not sql.one_statement_claims:
        return _one_row()
    from sqlalchemy import Text, bindparam, cast, func, insert, literal_column, select
    from sqlalchemy.dialects.postgresql import ARRAY

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    item = (
        func.unnest(
            cast(bindparam("task_ids"), ARRAY(Text)),
            cast(bindparam("bases"), ARRAY(Text)),
            cast(bindparam("payloads"), ARRAY(Text)),
        )
        .table_valued("task_id", "basis", "payload_json")
        .render_derived(name="item")
    )
    rows = select(
        cast(bindparam("run_id"), c.run_id.type),
        item.c.task_id,
        literal_column("'ready'"),
        item.c.basis,
        item.c.payload_json,
        literal_column("0"),
        cast(bindparam("stamp"), c.ready_at.type),
    ).select_from(item)
    columns = ["run_id", "task_id", "state", "basis", "payload_json", "token", "ready_at"]
    return insert(task_claims).from_select(columns, rows)


@statement
def _publish(_: SqlDialect) -> Executable:
    return _one_row()


def _one_row() -> Executable:
    from sqlalchemy import bindparam, insert, literal

    from agentctl.store.run_tables import task_claims

    return insert(task_claims).values(
        run_id=bindparam("run_id"),
        task_id=bindparam("task_id"),
        state="ready",
        basis=bindparam("basis"),
        payload_json=bindparam("payload_json"),
        token=literal(0),
        ready_at=bindparam("stamp"),
    )


def claim_states(
    conn: Any, run_id: str, task_ids: Sequence[str]
) -> dict[str, tuple[str, str | None]]:
    """``task id -> (state, outcome JSON)`` for the rows of ``task_ids`` that exist."""
    found: dict[str, tuple[str, str | None]] = {}
    for start in range(0, len(task_ids), _CHUNK):
        listed = id_values(padded(task_ids[start : start + _CHUNK]), "task")
        rows = _claim_states(len(listed)).run(conn, run_id=run_id, **listed)
        found.update((str(row[0]), (str(row[1]), row[2])) for row in rows)
    return found


@lru_cache(maxsize=16)
def _claim_states(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import task_claims

        c = task_claims.c
        return select(c.task_id, c.state, c.outcome_json).where(
            c.run_id == bindparam("run_id"), id_list(c.task_id, count, "task")
        )

    return Statement(build, f"claim_states({count})")


def claims_done(conn: Any, run_id: str, task_ids: Sequence[str]) -> tuple[int, int]:
    """``(rows of task_ids that exist, of them done)``: what an owner waiting for its batch
    reads on each wake-up (one row per chunk, where :func:`claim_states` returns every
    outcome)."""
    rows = done = 0
    for start in range(0, len(task_ids), _CHUNK):
        chunk = task_ids[start : start + _CHUNK]
        # Padding repeats the last id, which IN counts once: the counts stay exact.
        listed = id_values(padded(chunk), "task")
        row = _claims_done(len(listed)).run(conn, run_id=run_id, **listed).first()
        rows, done = rows + int(row[0] or 0), done + int(row[1] or 0)
    return rows, done


@lru_cache(maxsize=16)
def _claims_done(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, case, func, literal_column, select

        from agentctl.store.run_tables import task_claims

        c = task_claims.c
        return select(
            func.count(), func.count(case((c.state == "done", literal_column("1"))))
        ).where(c.run_id == bindparam("run_id"), id_list(c.task_id, count, "task"))

    return Statement(build, f"claims_done({count})")


def remove_claims(conn: Any, run_id: str, task_ids: Sequence[str] | None = None) -> None:
    """Withdraw rows (all of the run's when ``task_ids`` is None): their holders' next
    fenced write fails."""
    if task_ids is None:
        _remove_all.run(conn, run_id=run_id)
        return
    for start in range(0, len(task_ids), _CHUNK):
        listed = id_values(padded(task_ids[start : start + _CHUNK]), "task")
        _remove(len(listed)).run(conn, run_id=run_id, **listed)


@statement
def _remove_all(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.run_tables import task_claims

    return delete(task_claims).where(task_claims.c.run_id == bindparam("run_id"))


@lru_cache(maxsize=16)
def _remove(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, delete

        from agentctl.store.run_tables import task_claims

        c = task_claims.c
        return delete(task_claims).where(
            c.run_id == bindparam("run_id"), id_list(c.task_id, count, "task")
        )

    return Statement(build, f"remove_claims({count})")


def published_task_ids(conn: Any, run_id: str) -> list[str]:
    """The tasks of ``run_id`` published for workers now (the owner's current batch)."""
    return [str(row[0]) for row in _published.run(conn, run_id=run_id)]
