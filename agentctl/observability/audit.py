"""The per-run audit log: ordered, versioned, redacted and hash-chained.

Each event stores the digest of the one before it, and its own digest covers its run,
sequence number, kind, task, effect, payload, time and the previous digest. Editing,
dropping or reordering any stored event breaks the chain, which ``verify_chain`` (and
``agentctl audit RUN --verify``) reports with the first broken sequence number.

Appending runs inside the caller's transaction: an audit event commits together with the
transition it describes, never on its own. A claimed task's events (PostgreSQL workers)
are appended to their claim's lane first and join the chain when the run's owner adopts
the lane (``observability/audit_lanes.py``).
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, PlainSerializer
from pydantic.dataclasses import dataclass as record

from agentctl.digest import canonical_json, digest_bytes
from agentctl.observability import telemetry
from agentctl.store import audit_repo
from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.timestamps import to_db
from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "AuditEvent",
    "ChainAppends",
    "ChainReport",
    "append_event",
    "append_event_after",
    "append_to_chain",
    "count_events",
    "current_trace_ids",
    "event_digest",
    "events_and_chain",
    "first_break",
    "list_events",
    "stored_payload_json",
    "verify_chain",
]

Redactor = Callable[[Any], Any]


def _stamp(value: datetime) -> str:
    """``utc(value).replace(tzinfo=None).isoformat()``: the UTC wall time without a zone.

    The digest covers it: the stored form (see agentctl.store.timestamps) carries no zone,
    so a reread event digests the same. It is the stored text with a ``T`` for its space,
    without the fraction when it is zero (as isoformat writes it), so an event's time is
    formatted once for its row and its digest (a property test holds the two equal)."""
    text = to_db(value)
    if text.endswith(".000000"):
        text = text[:-7]
    return text[:10] + "T" + text[11:]


StampedTime = Annotated[datetime, PlainSerializer(_stamp, return_type=str)]
"""A time written as the UTC wall time the event digest covers."""


@dataclass(frozen=True, slots=True)
class AuditEvent(CamelRecord):
    """One event of a run's chain. Its JSON form (``audit RUN --output json``) leaves out
    the run id; ``traceId`` and ``spanId`` (correlation with a trace, not chained) appear
    only for events written while telemetry was on, which always records both.

    A record on the per-step path (every transition appends one): a plain dataclass whose
    JSON form pydantic derives (docs/architecture.md)."""

    __pydantic_config__: ClassVar[ConfigDict] = CAMEL

    run_id: Annotated[str, Field(exclude=True)]
    seq: int
    kind: str
    task_id: str | None
    effect_id: str | None
    payload: Any
    prev_digest: str | None
    digest: str
    created_at: StampedTime
    format_version: int = FORMAT_VERSION
    trace_id: Annotated[str | None, omitted_when(None)] = None
    span_id: Annotated[str | None, omitted_when(None)] = None


def event_digest(
    run_id: str,
    seq: int,
    kind: str,
    task_id: str | None,
    effect_id: str | None,
    payload_json: str,
    prev_digest: str | None,
    created_at: datetime,
    format_version: int,
) -> str:
    """``digest_json`` of the event's nine fields (``runId``, ``seq``, ``kind``, ``taskId``,
    ``effectId``, ``payload``, ``prevDigest``, ``createdAt``, ``formatVersion``), with the
    canonical text of that object written out in sorted key order: it is taken for every
    event appended and every event verified."""
    text = _DIGESTED % (
        _string(_stamp(created_at)),
        "null" if effect_id is None else _string(effect_id),
        int(format_version),
        _string(kind),
        _string(payload_json),
        "null" if prev_digest is None else _string(prev_digest),
        _string(run_id),
        int(seq),
        "null" if task_id is None else _string(task_id),
    )
    return digest_bytes(text.encode("utf-8"))


#: How canonical JSON writes a string.
_string = json.encoder.encode_basestring

#: The canonical text of an event's digested object, its members in sorted key order
#: (one formatting per event, not a concatenation of twenty pieces).
_DIGESTED = (
    '{"createdAt":%s,"effectId":%s,"formatVersion":%d,"kind":%s,"payload":%s,'
    '"prevDigest":%s,"runId":%s,"seq":%d,"taskId":%s}'
)


def append_event(
    conn: SqlRunner,
    run_id: str,
    kind: str,
    payload: Any,
    *,
    now: datetime,
    task_id: str | None = None,
    effect_id: str | None = None,
    redact: Redactor | None = None,
) -> AuditEvent:
    """Append one event to the run's chain inside the caller's transaction."""
    last = audit_repo.chain_head(conn, run_id)
    return append_event_after(
        conn,
        run_id,
        kind,
        payload,
        now=now,
        seq=1 if last is None else last[0] + 1,
        prev_digest=None if last is None else last[1],
        task_id=task_id,
        effect_id=effect_id,
        redact=redact,
    )


def append_event_after(
    conn: SqlRunner,
    run_id: str,
    kind: str,
    payload: Any,
    *,
    now: datetime,
    seq: int,
    prev_digest: str | None,
    task_id: str | None = None,
    effect_id: str | None = None,
    redact: Redactor | None = None,
) -> AuditEvent:
    """Append event ``seq`` after a chain head the caller already knows (no read)."""
    stored_payload, digest, trace_id, span_id = _append(
        conn, run_id, kind, payload, now, seq, prev_digest, task_id, effect_id, redact
    )
    return AuditEvent(
        run_id,
        seq,
        kind,
        task_id,
        effect_id,
        stored_payload,
        prev_digest,
        digest,
        now,
        trace_id=trace_id,
        span_id=span_id,
    )


def append_to_chain(
    conn: SqlRunner,
    run_id: str,
    kind: str,
    payload: Any,
    *,
    now: datetime,
    task_id: str | None = None,
    effect_id: str | None = None,
    redact: Redactor | None = None,
) -> None:
    """:func:`append_event` for a writer that does not need the event back (a run's
    transitions): the same row, without building the record."""
    last = audit_repo.chain_head(conn, run_id)
    _append(
        conn,
        run_id,
        kind,
        payload,
        now,
        1 if last is None else last[0] + 1,
        None if last is None else last[1],
        task_id,
        effect_id,
        redact,
    )


def _append(
    conn: SqlRunner,
    run_id: str,
    kind: str,
    payload: Any,
    now: datetime,
    seq: int,
    prev_digest: str | None,
    task_id: str | None,
    effect_id: str | None,
    redact: Redactor | None,
) -> tuple[Any, str, str | None, str | None]:
    """Insert one event of the chain; its stored payload, digest, trace and span ids."""
    stored_payload, values = _event(
        conn, run_id, kind, payload, now, seq, prev_digest, task_id, effect_id, redact
    )
    audit_repo.insert_event_rows(conn, [values])
    return stored_payload, values["digest"], values["trace_id"], values["span_id"]


def _event(
    conn: SqlRunner,
    run_id: str,
    kind: str,
    payload: Any,
    now: datetime,
    seq: int,
    prev_digest: str | None,
    task_id: str | None,
    effect_id: str | None,
    redact: Redactor | None,
) -> tuple[Any, dict[str, Any]]:
    """One event of the chain: its stored payload and its column values (digest included)."""
    stored_payload = redact(payload) if redact is not None else payload
    values = _event_row(
        conn,
        run_id,
        kind,
        canonical_json(stored_payload),
        now,
        seq,
        prev_digest,
        task_id,
        effect_id,
    )
    return stored_payload, values


def stored_payload_json(payload: Any, redact: Redactor | None) -> str:
    """The JSON an event stores for ``payload``: redacted first, then canonical (the run's
    chain and a claimed task's lane store the same text)."""
    return canonical_json(redact(payload) if redact is not None else payload)


def current_trace_ids() -> tuple[str | None, str | None]:
    """The trace and span an event written now correlates with (outside its digest)."""
    ids = telemetry.active().current_ids()
    return ids if ids is not None else (None, None)


def _event_row(
    conn: SqlRunner,
    run_id: str,
    kind: str,
    payload_json: str,
    now: datetime,
    seq: int,
    prev_digest: str | None,
    task_id: str | None,
    effect_id: str | None,
) -> dict[str, Any]:
    """The column values of event ``seq`` whose stored payload's JSON is ``payload_json``."""
    digest = event_digest(
        run_id, seq, kind, task_id, effect_id, payload_json, prev_digest, now, FORMAT_VERSION
    )
    trace_id, span_id = current_trace_ids()
    return audit_repo.event_values(
        conn,
        run_id=run_id,
        seq=seq,
        format_version=FORMAT_VERSION,
        kind=kind,
        task_id=task_id,
        effect_id=effect_id,
        payload_json=payload_json,
        prev_digest=prev_digest,
        digest=digest,
        created_at=now,
        trace_id=trace_id,
        span_id=span_id,
    )


class ChainAppends:
    """Events appended to one run's chain inside one write transaction, inserted together
    by :meth:`flush` (one driver call, however many events).

    The chain's head is read at the first append after each flush and then carried
    forward in memory: a write of a run holds that run's write lock until it commits
    (``BEGIN IMMEDIATE`` on SQLite, the run's advisory lock on PostgreSQL, see
    store/locks.py), so no other writer can append in between. Whatever else the
    transaction does that may append to the chain (:func:`append_event`) must come after a
    :meth:`flush`, which makes the next append read the head again. Events not flushed
    are never written: the caller flushes before its transaction commits."""

    def __init__(self, run_id: str, redact: Redactor | None = None) -> None:
        self.run_id = run_id
        self._redact = redact
        self._head: tuple[int, str | None] | None = None
        self._rows: list[dict[str, Any]] = []

    def append(
        self,
        conn: SqlRunner,
        kind: str,
        payload: Any,
        *,
        now: datetime,
        task_id: str | None = None,
        effect_id: str | None = None,
    ) -> None:
        self.append_encoded(
            conn, kind, self.encode(payload), now=now, task_id=task_id, effect_id=effect_id
        )

    def encode(self, payload: Any) -> str:
        """The JSON an event stores for ``payload`` (redacted first): what
        :meth:`append_encoded` takes, made before the transaction that appends it."""
        return stored_payload_json(payload, self._redact)

    def append_encoded(
        self,
        conn: SqlRunner,
        kind: str,
        payload_json: str,
        *,
        now: datetime,
        task_id: str | None = None,
        effect_id: str | None = None,
    ) -> None:
        """:meth:`append` of a payload :meth:`encode` made."""
        head = self._head
        if head is None:
            head = audit_repo.chain_head(conn, self.run_id) or (0, None)
        seq = head[0] + 1
        values = _event_row(
            conn, self.run_id, kind, payload_json, now, seq, head[1], task_id, effect_id
        )
        self._rows.append(values)
        self._head = (seq, values["digest"])

    def flush(self, conn: SqlRunner) -> None:
        """Insert the events appended since the last flush."""
        rows, self._rows, self._head = self._rows, [], None
        if rows:
            audit_repo.insert_event_rows(conn, rows)


def _payload(run_id: str, seq: int, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        from agentctl.errors import PersistenceError

        raise PersistenceError(
            f"audit event {seq} of run {run_id} has a payload that is not JSON: {exc}",
            code="store.corrupt",
            hint="the database was modified outside agentctl; keep a copy for investigation",
            run_id=run_id,
        ) from exc


def list_events(conn: SqlRunner, run_id: str) -> list[AuditEvent]:
    return _events(run_id, audit_repo.events(conn, run_id))


def events_and_chain(conn: SqlRunner, run_id: str) -> tuple[list[AuditEvent], ChainReport]:
    """A run's events and the verification of its chain from one read of the rows
    (``inspect`` and the run page show both)."""
    rows = audit_repo.events(conn, run_id)
    return _events(run_id, rows), _verify_rows(run_id, rows)


def _events(run_id: str, rows: Iterable[audit_repo.AuditRow]) -> list[AuditEvent]:
    events = []
    for row in rows:
        check_format_version("audit event", f"{run_id}#{row.seq}", row.format_version)
        events.append(
            AuditEvent(
                run_id=run_id,
                seq=row.seq,
                kind=row.kind,
                task_id=row.task_id,
                effect_id=row.effect_id,
                payload=_payload(run_id, row.seq, row.payload_json),
                prev_digest=row.prev_digest,
                digest=row.digest,
                created_at=row.created_at,
                format_version=row.format_version,
                trace_id=row.trace_id,
                span_id=row.span_id,
            )
        )
    return events


@record(frozen=True, slots=True, config=CAMEL)
class ChainReport(CamelRecord):
    """Whether a run's audit chain verifies; the first break when it does not."""

    run_id: str
    events: int
    ok: Annotated[bool, Field(alias="verified")]
    broken_at: int | None = None
    problem: str | None = None
    #: Claimed tasks' events not adopted into the chain yet, and their lanes
    #: (observability/audit_lanes.py): pending, verified on their own, not a break.
    pending_events: Annotated[int, omitted_when(0)] = 0
    pending_lanes: Annotated[int, omitted_when(0)] = 0


def verify_chain(conn: SqlRunner, run_id: str) -> ChainReport:
    """Recompute every digest and link; report the first break."""
    return _verify_rows(run_id, audit_repo.events(conn, run_id))


def _verify_rows(run_id: str, rows: Iterable[audit_repo.AuditRow]) -> ChainReport:
    events = list(rows)
    found = first_break(run_id, ((row.seq, row) for row in events), origin=None)
    if found is None:
        return ChainReport(run_id, len(events), True)
    position, seq, problem = found
    return ChainReport(run_id, position, False, seq, problem)


def first_break(
    run_id: str, rows: Iterable[tuple[int, Any]], *, origin: str | None, noun: str = "event"
) -> tuple[int, int, str] | None:
    """The first break of events chained from ``origin``, given in order as ``(seq, row)``
    (a row has the digested fields, ``prev_digest`` and ``digest``): its position from 1,
    its sequence number and what broke; None when every number, link and digest holds.
    The one rule for the run's chain and for a claimed task's lane
    (observability/audit_lanes.py, whose ``seq`` is its lane's)."""
    prev = origin
    for position, (seq, row) in enumerate(rows, start=1):
        if seq != position:
            return position, seq, f"expected {noun} {position}"
        if row.prev_digest != prev:
            return position, seq, "link to the previous event broken"
        digest = event_digest(
            run_id,
            seq,
            row.kind,
            row.task_id,
            row.effect_id,
            row.payload_json,
            row.prev_digest,
            row.created_at,
            row.format_version,
        )
        if digest != row.digest:
            return position, seq, "event content does not match digest"
        prev = row.digest
    return None


def count_events(conn: SqlRunner, run_id: str) -> int:
    return audit_repo.count_events(conn, run_id)
