"""Checkpoint rows: the working-memory delta (or snapshot) each task transition commits.

Every function runs in the caller's transaction; the executor inserts a checkpoint in
the transaction of the transition it records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.sealing import seal, unseal
from agentctl.store.statements import statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "CheckpointRow",
    "count",
    "insert",
    "insert_many",
    "last_seq",
    "last_snapshot_seq",
    "since",
]


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    seq: int
    format_version: int
    transition: str
    memory_delta_json: str
    is_snapshot: bool
    checksum: str


def last_seq(conn: SqlRunner, run_id: str) -> int | None:
    row = _last_seq.run(conn, run_id=run_id).first()
    return None if row is None or row[0] is None else int(row[0])


@statement
def _last_seq(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.audit_tables import checkpoints

    return select(func.max(checkpoints.c.seq)).where(checkpoints.c.run_id == bindparam("run_id"))


def last_snapshot_seq(conn: SqlRunner, run_id: str) -> int | None:
    row = _last_snapshot_seq.run(conn, run_id=run_id).first()
    return None if row is None or row[0] is None else int(row[0])


@statement
def _last_snapshot_seq(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.audit_tables import checkpoints

    c = checkpoints.c
    return select(func.max(c.seq)).where(c.run_id == bindparam("run_id"), c.is_snapshot == 1)


def since(conn: SqlRunner, run_id: str, seq: int | None) -> list[CheckpointRow]:
    """A run's checkpoints from ``seq`` on (all of them when None), in order."""
    if seq is None:
        rows = _all_of_run.run(conn, run_id=run_id)
    else:
        rows = _since.run(conn, run_id=run_id, seq=seq)
    return [
        CheckpointRow(
            int(row[0]),
            int(row[1]),
            row[2],
            unseal(conn, "checkpoints", "memory_delta_json", (run_id, int(row[0])), row[3]),
            bool(row[4]),
            row[5],
        )
        for row in rows
    ]


_READ = ("seq", "format_version", "transition", "memory_delta_json", "is_snapshot", "checksum")


def _of_run() -> Select[Any]:
    from sqlalchemy import bindparam, select

    from agentctl.store.audit_tables import checkpoints

    c = checkpoints.c
    return (
        select(
            c.seq, c.format_version, c.transition, c.memory_delta_json, c.is_snapshot, c.checksum
        )
        .where(c.run_id == bindparam("run_id"))
        .order_by(c.seq)
    )


@statement
def _all_of_run(_: SqlDialect) -> Executable:
    return _of_run()


@statement
def _since(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.audit_tables import checkpoints

    return _of_run().where(checkpoints.c.seq >= bindparam("seq"))


def insert(
    conn: SqlRunner,
    run_id: str,
    seq: int,
    *,
    transition: str,
    delta_json: str,
    is_snapshot: bool,
    checksum: str,
    now: datetime,
) -> None:
    _insert.run(
        conn,
        **_values(conn, run_id, seq, transition, delta_json, is_snapshot, checksum, now),
    )


def insert_many(
    conn: SqlRunner, rows: list[tuple[str, int, str, str, bool, str, datetime]]
) -> None:
    """:func:`insert` of several checkpoints in one driver call: each row is ``(run_id, seq,
    transition, delta_json, is_snapshot, checksum, now)``, stored as :func:`insert` stores it."""
    _insert.run_many(conn, [_values(conn, *row) for row in rows])


def _values(
    conn: SqlRunner,
    run_id: str,
    seq: int,
    transition: str,
    delta_json: str,
    is_snapshot: bool,
    checksum: str,
    now: datetime,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "seq": seq,
        "transition": transition,
        "memory_delta_json": seal(
            conn, "checkpoints", "memory_delta_json", (run_id, seq), delta_json
        ),
        "is_snapshot": int(is_snapshot),
        "checksum": checksum,
        "created_at": to_db(now),
    }


@statement
def _insert(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.audit_tables import checkpoints

    given = ("run_id", "seq", "transition", "memory_delta_json", "is_snapshot", "checksum")
    return insert(checkpoints).values(
        format_version=FORMAT_VERSION,
        created_at=bindparam("created_at"),
        **{name: bindparam(name) for name in given},
    )


def count(conn: SqlRunner, run_id: str) -> int:
    first = _count.run(conn, run_id=run_id).first()
    return int(first[0]) if first is not None else 0


@statement
def _count(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.audit_tables import checkpoints

    return select(func.count()).where(checkpoints.c.run_id == bindparam("run_id"))
