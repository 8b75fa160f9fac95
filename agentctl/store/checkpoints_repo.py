"""Checkpoint rows: the working-memory delta (or snapshot) each task transition commits.

Every function runs in the caller's transaction; the executor inserts a checkpoint in
the transaction of the transition it records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.sealing import seal, unseal
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["CheckpointRow", "count", "insert", "last_seq", "last_snapshot_seq", "since"]


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    seq: int
    format_version: int
    transition: str
    memory_delta_json: str
    is_snapshot: bool
    checksum: str


def last_seq(conn: SqlRunner, run_id: str) -> int | None:
    row = conn.exec_driver_sql(
        "SELECT MAX(seq) FROM checkpoints WHERE run_id = ?", (run_id,)
    ).first()
    return None if row is None or row[0] is None else int(row[0])


def last_snapshot_seq(conn: SqlRunner, run_id: str) -> int | None:
    row = conn.exec_driver_sql(
        "SELECT MAX(seq) FROM checkpoints WHERE run_id = ? AND is_snapshot = 1", (run_id,)
    ).first()
    return None if row is None or row[0] is None else int(row[0])


def since(conn: SqlRunner, run_id: str, seq: int | None) -> list[CheckpointRow]:
    """A run's checkpoints from ``seq`` on (all of them when None), in order."""
    if seq is None:
        rows = conn.exec_driver_sql(
            "SELECT seq, format_version, transition, memory_delta_json, is_snapshot, checksum "
            "FROM checkpoints WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
    else:
        rows = conn.exec_driver_sql(
            "SELECT seq, format_version, transition, memory_delta_json, is_snapshot, checksum "
            "FROM checkpoints WHERE run_id = ? AND seq >= ? ORDER BY seq",
            (run_id, seq),
        )
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
    conn.exec_driver_sql(
        "INSERT INTO checkpoints (run_id, seq, format_version, transition, "
        "memory_delta_json, is_snapshot, checksum, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            seq,
            FORMAT_VERSION,
            transition,
            seal(conn, "checkpoints", "memory_delta_json", (run_id, seq), delta_json),
            int(is_snapshot),
            checksum,
            to_db(now),
        ),
    )


def count(conn: SqlRunner, run_id: str) -> int:
    row = conn.exec_driver_sql("SELECT COUNT(*) FROM checkpoints WHERE run_id = ?", (run_id,))
    first = row.first()
    return int(first[0]) if first is not None else 0
