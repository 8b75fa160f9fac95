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

from agentctl.store import locks
from agentctl.store.sealing import seal, unseal
from agentctl.store.statements import columns, statement
from agentctl.store.timestamps import from_db, to_db

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "AuditRow",
    "LaneRow",
    "audited_runs",
    "chain_head",
    "count_events",
    "delete_lanes",
    "event_values",
    "events",
    "events_after",
    "insert_event_rows",
    "insert_lane_rows",
    "lane_events",
    "lane_values",
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
    "run_id",
    "seq",
    "format_version",
    "kind",
    "task_id",
    "effect_id",
    "payload_json",
    "prev_digest",
    "digest",
    "created_at",
    "trace_id",
    "span_id",
)


def _events_of_run() -> Select[Any]:
    from sqlalchemy import bindparam, select

    from agentctl.store.audit_tables import audit_events

    return (
        select(*columns(audit_events, _COLUMNS))
        .where(audit_events.c.run_id == bindparam("run_id"))
        .order_by(audit_events.c.seq)
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
    """``(seq, digest)`` of the run's last event, or None before its first.

    Inside a driver session's transaction (``DriverSession.chain_heads``) the head is read
    once per run and then carried by :func:`insert_event_rows`: a batch commit appends
    an event per task, and every writer of a run's chain holds that run's lock (or the
    whole store), so nothing but this transaction moves the head until it ends."""
    # The head decides the next append: read under the run's lock (taken here by a
    # claimed task's write, which defers it to this point: locks.hold_run).
    locks.hold_run(conn, run_id)
    heads: dict[str, tuple[int, str]] | None = getattr(conn, "chain_heads", None)
    if heads is not None:
        known = heads.get(run_id)
        if known is not None:
            return known
    row = _chain_head.run(conn, run_id=run_id).first()
    head = None if row is None else (int(row[0]), str(row[1]))
    if heads is not None and head is not None:
        heads[run_id] = head
    return head


@statement
def _chain_head(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.audit_tables import audit_events

    c = audit_events.c
    return (
        select(c.seq, c.digest)
        .where(c.run_id == bindparam("run_id"))
        .order_by(c.seq.desc())
        .limit(1)
    )


def insert_event_rows(conn: SqlRunner, rows: list[dict[str, Any]]) -> None:
    """Several events in one driver call, each given as :func:`event_values` made it.

    Every event is inserted here, so this is where a driver session's cached chain heads
    (:func:`chain_head`) follow the events it appends."""
    for run_id in {row["run_id"] for row in rows}:
        locks.hold_run(conn, run_id)  # an append after a head the caller carried
    if len(rows) == 1:
        _insert_event.run(conn, **rows[0])
    else:
        _insert_event.run_many(conn, rows)
    heads: dict[str, tuple[int, str]] | None = getattr(conn, "chain_heads", None)
    if heads is not None:
        for row in rows:
            heads[row["run_id"]] = (row["seq"], row["digest"])


def event_values(
    conn: SqlRunner,
    *,
    run_id: str,
    seq: int,
    format_version: int,
    kind: str,
    task_id: str | None,
    effect_id: str | None,
    payload_json: str,
    prev_digest: str | None,
    digest: str,
    created_at: datetime,
    trace_id: str | None,
    span_id: str | None,
) -> dict[str, Any]:
    """An event's column values as stored (the payload sealed when encryption is on)."""
    return {
        "run_id": run_id,
        "seq": seq,
        "format_version": format_version,
        "kind": kind,
        "task_id": task_id,
        "effect_id": effect_id,
        "payload_json": seal(conn, "audit_events", "payload_json", (run_id, seq), payload_json),
        "prev_digest": prev_digest,
        "digest": digest,
        "created_at": to_db(created_at),
        "trace_id": trace_id,
        "span_id": span_id,
    }


@statement
def _insert_event(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.audit_tables import audit_events

    return insert(audit_events).values(**{name: bindparam(name) for name in _COLUMNS})


def events(conn: SqlRunner, run_id: str) -> list[AuditRow]:
    """Every event of the run, by sequence number."""
    return [_row(conn, row) for row in _events.run(conn, run_id=run_id)]


@statement
def _events(_: SqlDialect) -> Executable:
    return _events_of_run()


def events_after(conn: SqlRunner, run_id: str, seq: int) -> list[AuditRow]:
    """The run's events after sequence number ``seq`` (what a follower has not seen yet)."""
    return [_row(conn, row) for row in _events_after.run(conn, run_id=run_id, seq=seq)]


@statement
def _events_after(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.audit_tables import audit_events

    return _events_of_run().where(audit_events.c.seq > bindparam("seq"))


def count_events(conn: SqlRunner, run_id: str) -> int:
    row = _count_events.run(conn, run_id=run_id).first()
    return 0 if row is None else int(row[0])


@statement
def _count_events(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.audit_tables import audit_events

    return select(func.count()).where(audit_events.c.run_id == bindparam("run_id"))


def audited_runs(conn: SqlRunner) -> list[str]:
    """Every run that has an audit chain, oldest first."""
    return [str(row[0]) for row in _audited_runs.run(conn)]


@statement
def _audited_runs(_: SqlDialect) -> Executable:
    from sqlalchemy import select

    from agentctl.store.audit_tables import audit_events

    c = audit_events.c
    return select(c.run_id).where(c.seq == 1).order_by(c.created_at, c.run_id)


# -- lanes: a claimed task's events before its run's owner adopts them ---------------------


@dataclass(frozen=True, slots=True)
class LaneRow:
    """One event of a claim's lane (``audit_lane_events``), its payload opened. ``live``:
    the claim still holds its task (``claimed`` with this token), so it may append more and
    its lane is not the owner's to adopt yet."""

    run_id: str
    task_id: str
    claim_token: int
    lane_seq: int
    format_version: int
    kind: str
    effect_id: str | None
    payload_json: str
    prev_digest: str
    digest: str
    created_at: datetime
    trace_id: str | None
    span_id: str | None
    live: bool


_LANE_COLUMNS = (
    "run_id",
    "task_id",
    "claim_token",
    "lane_seq",
    "format_version",
    "kind",
    "effect_id",
    "payload_json",
    "prev_digest",
    "digest",
    "created_at",
    "trace_id",
    "span_id",
)


def lane_values(
    conn: SqlRunner,
    *,
    run_id: str,
    task_id: str,
    claim_token: int,
    lane_seq: int,
    format_version: int,
    kind: str,
    effect_id: str | None,
    payload_json: str,
    prev_digest: str,
    digest: str,
    created_at: datetime,
    trace_id: str | None,
    span_id: str | None,
) -> dict[str, Any]:
    """A lane event's column values as stored (the payload sealed when encryption is on,
    under the lane event's own key: a value copied into the chain does not open)."""
    key = (run_id, task_id, claim_token, lane_seq)
    return {
        "run_id": run_id,
        "task_id": task_id,
        "claim_token": claim_token,
        "lane_seq": lane_seq,
        "format_version": format_version,
        "kind": kind,
        "effect_id": effect_id,
        "payload_json": seal(conn, "audit_lane_events", "payload_json", key, payload_json),
        "prev_digest": prev_digest,
        "digest": digest,
        "created_at": to_db(created_at),
        "trace_id": trace_id,
        "span_id": span_id,
    }


def insert_lane_rows(conn: SqlRunner, rows: list[dict[str, Any]]) -> None:
    """Lane events in one driver call, as :func:`lane_values` made them. No lock: only the
    claim's holder writes its lane, and its transaction checks the claim's fence."""
    if len(rows) == 1:
        _insert_lane_event.run(conn, **rows[0])
    else:
        _insert_lane_event.run_many(conn, rows)


@statement
def _insert_lane_event(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.audit_tables import audit_lane_events

    return insert(audit_lane_events).values(**{name: bindparam(name) for name in _LANE_COLUMNS})


def lane_events(conn: SqlRunner, run_id: str) -> list[LaneRow]:
    """Every lane event of the run (by task, claim token and lane sequence), each with
    whether its claim is live, read in one statement (so in one snapshot)."""
    out = []
    for row in _lane_events.run(conn, run_id=run_id):
        key = (str(row[0]), str(row[1]), int(row[2]), int(row[3]))
        out.append(
            LaneRow(
                run_id=key[0],
                task_id=key[1],
                claim_token=key[2],
                lane_seq=key[3],
                format_version=int(row[4]),
                kind=str(row[5]),
                effect_id=row[6],
                payload_json=str(unseal(conn, "audit_lane_events", "payload_json", key, row[7])),
                prev_digest=str(row[8]),
                digest=str(row[9]),
                created_at=from_db(row[10]),
                trace_id=row[11],
                span_id=row[12],
                live=bool(row[13]),
            )
        )
    return out


@statement
def _lane_events(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, exists, literal, select

    from agentctl.store.audit_tables import audit_lane_events
    from agentctl.store.run_tables import task_claims

    lane = audit_lane_events.c
    claim = task_claims.c
    live = exists(
        select(literal(1)).where(
            claim.run_id == lane.run_id,
            claim.task_id == lane.task_id,
            claim.token == lane.claim_token,
            claim.state == "claimed",
        )
    )
    return (
        select(*columns(audit_lane_events, _LANE_COLUMNS), live.label("live"))
        .where(lane.run_id == bindparam("run_id"))
        .order_by(lane.task_id, lane.claim_token, lane.lane_seq)
    )


def delete_lanes(conn: SqlRunner, run_id: str, lanes: Sequence[tuple[str, int]]) -> None:
    """Delete the lanes ``(task_id, claim_token)`` of the run (adopted into its chain)."""
    rows = [{"run_id": run_id, "task_id": t, "claim_token": token} for t, token in lanes]
    if len(rows) == 1:
        _delete_lane.run(conn, **rows[0])
    else:
        _delete_lane.run_many(conn, rows)


@statement
def _delete_lane(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.audit_tables import audit_lane_events

    c = audit_lane_events.c
    return delete(audit_lane_events).where(
        c.run_id == bindparam("run_id"),
        c.task_id == bindparam("task_id"),
        c.claim_token == bindparam("claim_token"),
    )
