"""The audit chain's rows: one ordered, hash-chained event list per run.

Appending runs inside the caller's transaction (an event commits with the transition it
describes) on a :class:`~agentctl.store.engine.SqlRunner`, so it works on the executor's
``DriverSession`` as well as on a SQLAlchemy connection. Digests are computed by
``agentctl.observability.audit``; this module stores and returns the rows as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.sealing import seal, unseal
from agentctl.store.timestamps import from_db, to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "AuditRow",
    "audited_runs",
    "chain_head",
    "count_events",
    "events",
    "events_after",
    "insert_event",
]


@dataclass(frozen=True, slots=True)
class AuditRow:
    run_id: str
    seq: int
    format_version: int
    kind: str
    task_id: str | None
    effect_id: str | None
    payload_json: str
    prev_digest: str | None
    digest: str
    created_at: datetime
    # The span current when the event was written; outside the chained digest.
    trace_id: str | None = None
    span_id: str | None = None


_COLUMNS = (
    "run_id, seq, format_version, kind, task_id, effect_id, payload_json, prev_digest, "
    "digest, created_at, trace_id, span_id"
)


def _row(conn: SqlRunner, row: Sequence[Any]) -> AuditRow:
    return AuditRow(
        run_id=str(row[0]),
        seq=int(row[1]),
        format_version=int(row[2]),
        kind=str(row[3]),
        task_id=row[4],
        effect_id=row[5],
        payload_json=str(
            unseal(conn, "audit_events", "payload_json", (str(row[0]), int(row[1])), row[6])
        ),
        prev_digest=row[7],
        digest=str(row[8]),
        created_at=from_db(row[9]),
        trace_id=row[10],
        span_id=row[11],
    )


def chain_head(conn: SqlRunner, run_id: str) -> tuple[int, str] | None:
    """``(seq, digest)`` of the run's last event, or None before its first."""
    row = conn.exec_driver_sql(
        "SELECT seq, digest FROM audit_events WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
        (run_id,),
    ).first()
    return None if row is None else (int(row[0]), str(row[1]))


def insert_event(conn: SqlRunner, row: AuditRow) -> None:
    conn.exec_driver_sql(
        f"INSERT INTO audit_events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
        (
            row.run_id,
            row.seq,
            row.format_version,
            row.kind,
            row.task_id,
            row.effect_id,
            seal(conn, "audit_events", "payload_json", (row.run_id, row.seq), row.payload_json),
            row.prev_digest,
            row.digest,
            to_db(row.created_at),
            row.trace_id,
            row.span_id,
        ),
    )


def events(conn: SqlRunner, run_id: str) -> list[AuditRow]:
    """Every event of the run, by sequence number."""
    rows = conn.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM audit_events WHERE run_id = ? ORDER BY seq",  # noqa: S608
        (run_id,),
    )
    return [_row(conn, row) for row in rows]


def events_after(conn: SqlRunner, run_id: str, seq: int) -> list[AuditRow]:
    """The run's events after sequence number ``seq`` (what a follower has not seen yet)."""
    rows = conn.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM audit_events WHERE run_id = ? AND seq > ? ORDER BY seq",  # noqa: S608
        (run_id, seq),
    )
    return [_row(conn, row) for row in rows]


def count_events(conn: SqlRunner, run_id: str) -> int:
    row = conn.exec_driver_sql(
        "SELECT COUNT(*) FROM audit_events WHERE run_id = ?", (run_id,)
    ).first()
    return 0 if row is None else int(row[0])


def audited_runs(conn: SqlRunner) -> list[str]:
    """Every run that has an audit chain, oldest first."""
    return [
        str(row[0])
        for row in conn.exec_driver_sql(
            "SELECT run_id FROM audit_events WHERE seq = 1 ORDER BY created_at, run_id"
        )
    ]
