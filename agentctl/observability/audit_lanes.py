"""Audit lanes: a claimed task's events, chained on their own until the run's owner adopts
them into the run's chain (docs/durable-execution.md, "Audit lanes").

A worker executing a claimed task (PostgreSQL workers, engine/run/claimed_tasks.py) does
not append to the run's chain: that meant reading the chain's head under the run's lock
and holding the lock to the commit, so every worker of one run queued on it. Each claim —
(run, task, fencing token) — has a lane instead (``audit_lane_events``):

- **writing** (:class:`ClaimLane`): only the claim's holder writes its lane, and each of
  its transactions checks the claim's fence (the claim's row read ``FOR SHARE`` until the
  commit), so the lane's head lives in the holder's memory: no read, no lock. The head
  moves on when the transaction commits and is put back when it rolls back. A lane is
  chained like the run's chain (:func:`~agentctl.observability.audit.event_digest`, with
  the lane's sequence number in place of ``seq``); its first event's ``prev`` is the
  claim's own digest (:func:`lane_origin`), so a lane cannot be spliced onto another claim;
- **adopting** (:func:`adopt_lanes`): the run's owner, inside one of its writes (which hold
  the run's lock from their ``BEGIN``), moves every lane whose claim can no longer write —
  its row ``done``, withdrawn (deleted) or claimed again under a new token — into the
  chain, and deletes it. A lane is verified first (a broken lane is refused with
  ``store.corrupt``: never laundered into a chain that verifies); its events then get the
  chain's next sequence numbers and links and a digest over the chain's fields, keeping
  their kind, payload, ids, time and trace ids. Lanes go in by their first event's time,
  then token and task; a lane's events by their lane order.

Why "can no longer write" is exact: a holder's write checks the claim row ``FOR SHARE`` and
keeps that row lock to its commit, so the update that finishes, reclaims or deletes the row
waits for (or, a reclaim, skips) every write that passed the fence, and a write that checks
after it fails and rolls back. Once the adoption's statement sees the claim not live, every
lane event its holder will ever commit is committed, and in that statement's snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.digest import digest_json
from agentctl.observability.audit import (
    Redactor,
    current_trace_ids,
    event_digest,
    first_break,
    stored_payload_json,
)
from agentctl.store import audit_repo
from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "ClaimLane",
    "LaneReport",
    "adopt_lanes",
    "lane_origin",
    "pending_events",
    "verify_lanes",
]


def lane_origin(run_id: str, task_id: str, claim_token: int) -> str:
    """The ``prev`` of a lane's first event: a digest of the claim it belongs to."""
    return digest_json({"lane": {"runId": run_id, "taskId": task_id, "claimToken": claim_token}})


class ClaimLane:
    """The lane of one claim, as its holder writes it (``RunLog(lane=...)`` routes the
    claimed task's events here). Appends happen inside :meth:`transaction`, which the
    claim's write wraps around each of its transactions: the head advances when the
    transaction commits, and is put back when it does not (nothing of it was written).
    Transactions of one lane are serialised in this process (a lock), as its events are."""

    __slots__ = ("_head", "_lock", "_pending", "_depth", "claim_token", "run_id", "task_id")

    def __init__(self, run_id: str, task_id: str, claim_token: int) -> None:
        self.run_id = run_id
        self.task_id = task_id
        self.claim_token = claim_token
        self._head: tuple[int, str] = (0, lane_origin(run_id, task_id, claim_token))
        self._pending: tuple[int, str] | None = None
        self._depth = 0
        self._lock = threading.RLock()

    @property
    def head(self) -> tuple[int, str]:
        """``(lane_seq, digest)`` of the lane's last committed event (0 and the origin)."""
        return self._head

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Around one write transaction of the claim: entered before its ``BEGIN``, left
        after its ``COMMIT`` (or its rollback, when an exception leaves it)."""
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._pending = self._head
            try:
                yield
            except BaseException:
                if self._depth == 1:
                    self._pending = None
                raise
            else:
                if self._depth == 1 and self._pending is not None:
                    self._head = self._pending
                    self._pending = None
            finally:
                self._depth -= 1

    def append(
        self,
        conn: SqlRunner,
        kind: str,
        payload: Any,
        *,
        now: datetime,
        effect_id: str | None,
        redact: Redactor | None = None,
    ) -> None:
        """Append one event to the lane inside the claim's current write transaction."""
        head = self._pending
        if head is None:
            raise RuntimeError(
                f"an event of claimed task {self.task_id} of run {self.run_id} was appended "
                "outside its claim's write transaction"
            )
        payload_json = stored_payload_json(payload, redact)
        seq = head[0] + 1
        digest = event_digest(
            self.run_id,
            seq,
            kind,
            self.task_id,
            effect_id,
            payload_json,
            head[1],
            now,
            FORMAT_VERSION,
        )
        trace_id, span_id = current_trace_ids()
        audit_repo.insert_lane_rows(
            conn,
            [
                audit_repo.lane_values(
                    conn,
                    run_id=self.run_id,
                    task_id=self.task_id,
                    claim_token=self.claim_token,
                    lane_seq=seq,
                    format_version=FORMAT_VERSION,
                    kind=kind,
                    effect_id=effect_id,
                    payload_json=payload_json,
                    prev_digest=head[1],
                    digest=digest,
                    created_at=now,
                    trace_id=trace_id,
                    span_id=span_id,
                )
            ],
        )
        self._pending = (seq, digest)


def _corrupt(run_id: str, row: audit_repo.LaneRow, problem: str) -> Exception:
    from agentctl.errors import PersistenceError

    return PersistenceError(
        f"the audit lane of task {row.task_id} of run {run_id} (claim token "
        f"{row.claim_token}) is broken at lane event {row.lane_seq}: {problem}; it was not "
        "adopted into the run's chain",
        code="store.corrupt",
        hint="the database was modified outside agentctl; keep a copy for investigation "
        f"(`agentctl audit {run_id} --verify` shows the lane)",
        run_id=run_id,
    )


def _lane_problem(run_id: str, rows: list[audit_repo.LaneRow]) -> tuple[int, str] | None:
    """The first break of one lane's events (in lane order): its lane seq and what broke."""
    first = rows[0]
    found = first_break(
        run_id,
        ((row.lane_seq, row) for row in rows),
        origin=lane_origin(run_id, first.task_id, first.claim_token),
        noun="lane event",
    )
    return None if found is None else (found[1], found[2])


def _lanes(rows: list[audit_repo.LaneRow]) -> list[list[audit_repo.LaneRow]]:
    """The lanes of ``rows`` (read by task, token and lane seq) in adoption order: by their
    first event's time, then claim token, then task."""
    lanes: dict[tuple[str, int], list[audit_repo.LaneRow]] = {}
    for row in rows:
        lanes.setdefault((row.task_id, row.claim_token), []).append(row)
    return sorted(
        lanes.values(), key=lambda lane: (lane[0].created_at, lane[0].claim_token, lane[0].task_id)
    )


def adopt_lanes(conn: SqlRunner, run_id: str) -> int:
    """Move every lane of ``run_id`` whose claim can no longer write into its chain, inside
    the owner's write transaction (which holds the run's lock); the number of events moved.
    Refuses (``store.corrupt``, naming the run, task and lane event) a lane that does not
    verify, and moves nothing then."""
    done = [row for row in audit_repo.lane_events(conn, run_id) if not row.live]
    if not done:
        return 0
    lanes = _lanes(done)
    for lane in lanes:
        check_format_version(
            "audit lane event", f"{run_id}/{lane[0].task_id}", max(r.format_version for r in lane)
        )
        broken = _lane_problem(run_id, lane)
        if broken is not None:
            row = next(r for r in lane if r.lane_seq == broken[0])
            raise _corrupt(run_id, row, broken[1])
    head = audit_repo.chain_head(conn, run_id)
    seq, prev = (0, None) if head is None else head
    values = []
    for lane in lanes:
        for row in lane:
            seq += 1
            digest = event_digest(
                run_id,
                seq,
                row.kind,
                row.task_id,
                row.effect_id,
                row.payload_json,
                prev,
                row.created_at,
                row.format_version,
            )
            values.append(
                audit_repo.event_values(
                    conn,
                    run_id=run_id,
                    seq=seq,
                    format_version=row.format_version,
                    kind=row.kind,
                    task_id=row.task_id,
                    effect_id=row.effect_id,
                    payload_json=row.payload_json,
                    prev_digest=prev,
                    digest=digest,
                    created_at=row.created_at,
                    trace_id=row.trace_id,
                    span_id=row.span_id,
                )
            )
            prev = digest
    audit_repo.insert_event_rows(conn, values)
    audit_repo.delete_lanes(
        conn, run_id, [(lane[0].task_id, lane[0].claim_token) for lane in lanes]
    )
    return len(values)


def pending_events(conn: SqlRunner, run_id: str) -> list[audit_repo.LaneRow]:
    """The run's lane events not adopted yet, in the order adoption would give them: what
    a reader deciding from events (``journal.remote_task``) looks at after the chain."""
    return [row for lane in _lanes(audit_repo.lane_events(conn, run_id)) for row in lane]


@dataclass(frozen=True, slots=True)
class LaneReport:
    """The run's pending lanes (claimed tasks' events not adopted yet) and the first break
    among them, if any: ``task_id``, ``claim_token`` and ``lane_seq`` name it."""

    lanes: int
    events: int
    ok: bool
    task_id: str | None = None
    claim_token: int | None = None
    lane_seq: int | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lanes": self.lanes, "events": self.events, "verified": self.ok}
        if not self.ok:
            out.update(
                taskId=self.task_id,
                claimToken=self.claim_token,
                laneSeq=self.lane_seq,
                problem=self.problem,
            )
        return out


def verify_lanes(conn: SqlRunner, run_id: str) -> LaneReport:
    """Verify every pending lane of the run (each chained from its claim's origin)."""
    lanes = _lanes(audit_repo.lane_events(conn, run_id))
    events = sum(len(lane) for lane in lanes)
    for lane in lanes:
        broken = _lane_problem(run_id, lane)
        if broken is not None:
            first = lane[0]
            return LaneReport(len(lanes), events, False, first.task_id, first.claim_token, *broken)
    return LaneReport(len(lanes), events, True)
