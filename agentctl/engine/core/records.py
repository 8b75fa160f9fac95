"""Run and task rows as the executor sees them, and the transactions that change them.

One task transition is one transaction: the task row, its working-memory delta (as a
checkpoint), and its audit event commit together. The checkpoint sequence is kept in
memory by the run's single owner; the audit chain head is read inside each write
transaction, because operators append to a live run's chain from other processes.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, field_serializer

from agentctl.compiler.plan import Plan
from agentctl.digest import canonical_json, digest_bytes, parse_json
from agentctl.errors import PersistenceError
from agentctl.observability import audit
from agentctl.store import checkpoints_repo, plan_repo, runs_repo, tasks_repo
from agentctl.store.engine import SqlRunner
from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.states import RunState
from agentctl.store.transitions import guarded_update, guarded_updates
from agentctl.typed_records import CAMEL, CamelRecord

if TYPE_CHECKING:
    from agentctl.observability.audit_lanes import ClaimLane

__all__ = [
    "TERMINAL_RUN_STATES",
    "TERMINAL_TASK_STATES",
    "Attempt",
    "RunLog",
    "RunRow",
    "TaskRow",
    "TransitionWrites",
    "checkpoint_checksum",
    "load_run",
    "load_run_state",
    "load_tasks",
    "replay_memory",
    "whole_plan",
]

TERMINAL_TASK_STATES = frozenset({"succeeded", "failed", "skipped", "cancelled"})
TERMINAL_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED})
SNAPSHOT_EVERY = 64
#: How canonical JSON writes a string (keys and values alike).
_json_string = json.encoder.encode_basestring


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _result(text: str | None) -> Any:
    """A run's result as stored (its copy, or every task's output assembled by
    ``store/run_results.py``): large texts, parsed by the faster parser."""
    return None if text is None else parse_json(text)


@dataclass
class RunRow:
    id: str
    workflow_name: str
    workflow_digest: str
    plan_digest: str
    plan: dict[str, Any]
    workflow: dict[str, Any]
    workflow_file: str | None
    inputs: dict[str, Any]
    mode: str
    status: str
    workspace: str | None
    source_run_id: str | None
    relation: str | None
    output: Any
    error: Any
    created_at: datetime
    updated_at: datetime
    deadline_at: datetime | None
    cancel_requested: bool
    cancel_reason: str | None
    owner_id: str | None
    owner_lease_expires_at: datetime | None

    def summary_json(self) -> dict[str, Any]:
        return {
            "runId": self.id,
            "workflow": self.workflow_name,
            "state": self.status,
            "mode": self.mode,
            "sourceRunId": self.source_run_id,
            "createdAt": self.created_at.isoformat(),
            "updatedAt": self.updated_at.isoformat(),
        }


@dataclass
class TaskRow(CamelRecord):
    """A task's row as the executor keeps it; its JSON form (what ``inspect`` shows per
    task) is ``{taskId, state, attempt, disposition, output, error}``.

    A record on the per-step path: a plain dataclass (built without validation, as fast
    as before) whose JSON form pydantic derives (docs/architecture.md)."""

    __pydantic_config__: ClassVar[ConfigDict] = CAMEL

    task_id: str
    ordinal: Annotated[int, Field(exclude=True)]
    status: Annotated[str, Field(alias="state")]
    attempt: int
    disposition: str | None
    output: Any
    has_output: Annotated[bool, Field(exclude=True)]
    error: Any
    started_at: Annotated[datetime | None, Field(exclude=True)] = None
    finished_at: Annotated[datetime | None, Field(exclude=True)] = None
    extra: Annotated[dict[str, Any], Field(exclude=True)] = field(default_factory=dict)
    #: The output as stored (its canonical JSON), when this process read or wrote it.
    output_json: Annotated[str | None, Field(exclude=True)] = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_TASK_STATES

    @field_serializer("output")
    def _shown_output(self, output: Any) -> Any:
        return output if self.has_output else None


def load_run(conn: SqlRunner, run_id: str, *, whole: bool = False) -> RunRow:
    """The run row. ``plan`` is the plan's header (``taskCount`` in place of ``tasks`` and
    ``order``: the task records are rows of their own) and ``workflow`` the document
    without ``spec.tasks``; with ``whole`` they are the complete plan (the shape of
    ``Plan.to_json``) and the complete document, which cost time in proportion to the
    run's length: only plan views, retry, fork and compensation ask for them."""
    row = runs_repo.run(conn, run_id)
    try:
        plan = json.loads(row["plan_json"])
        workflow = json.loads(row["workflow_json"])
        if whole:
            plan = whole_plan(conn, run_id, plan)
            document = plan_repo.workflow_document(conn, run_id)
            if document is not None:
                workflow = json.loads(document)
        return RunRow(
            id=row["id"],
            workflow_name=row["workflow_name"],
            workflow_digest=row["workflow_digest"],
            plan_digest=row["plan_digest"],
            plan=plan,
            workflow=workflow,
            workflow_file=row["workflow_file"],
            inputs=json.loads(row["inputs_json"]),
            mode=row["mode"],
            status=row["status"],
            workspace=row["workspace"],
            source_run_id=row["source_run_id"],
            relation=row["relation"],
            output=_result(row["output_json"]),
            error=_loads(row["error_json"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            deadline_at=row["deadline_at"],
            cancel_requested=bool(row["cancel_requested"]),
            cancel_reason=row["cancel_reason"],
            owner_id=row["owner_id"],
            owner_lease_expires_at=row["owner_lease_expires_at"],
        )
    except (ValueError, TypeError) as exc:
        raise PersistenceError(
            f"run {run_id} has a corrupt record: {exc}",
            code="store.corrupt",
            hint="inspect the database; the run cannot be read",
            run_id=run_id,
        ) from exc


def whole_plan(conn: SqlRunner, run_id: str, header: dict[str, Any]) -> dict[str, Any]:
    """The complete stored plan (``Plan.to_json`` shape) of a header and its task rows."""
    if "taskCount" not in header:
        return header  # not a stored header: read as it is (and refused if malformed)
    records = plan_repo.records(conn, run_id)
    return Plan.from_parts(header, [(t, json.loads(r)) for t, r in records]).to_json()


def load_run_state(conn: SqlRunner, run_id: str) -> tuple[str, Any, Any]:
    """``(status, output, error)`` of a run without reading its plan: the cheap read behind
    "is this run already finished?" (a completed run is answered in well under 1 ms)."""
    status, output, error = runs_repo.run_state(conn, run_id)
    return status, _result(output), _loads(error)


def load_tasks(
    conn: SqlRunner, run_id: str, task_ids: Sequence[str] | None = None
) -> dict[str, TaskRow]:
    """Every task row of a run in plan order (one driver-level query: resume reads
    hundreds of rows, and statement compilation would cost more than the read); only the
    given tasks (those that exist) when ``task_ids`` is given."""
    if task_ids is None:
        rows = tasks_repo.task_states(conn, run_id)
    else:
        rows = tasks_repo.task_states_of(conn, run_id, task_ids)
    out: dict[str, TaskRow] = {}
    for task_id, ordinal, status, attempt, disposition, output, error, version in rows:
        if version > FORMAT_VERSION:
            check_format_version("task", f"{run_id}/{task_id}", int(version))
        out[task_id] = TaskRow(
            task_id=task_id,
            ordinal=int(ordinal),
            status=status,
            attempt=int(attempt),
            disposition=disposition,
            output=_loads(output),
            has_output=output is not None,
            error=_loads(error),
        )
    return out


def replay_memory(conn: SqlRunner, run_id: str, initial: Mapping[str, Any]) -> dict[str, Any]:
    """Working memory after the last checkpoint: the latest snapshot plus later deltas."""
    snapshot_seq = checkpoints_repo.last_snapshot_seq(conn, run_id)
    return _apply_checkpoints(
        run_id, dict(initial), checkpoints_repo.since(conn, run_id, snapshot_seq)
    )


def advance_memory(
    conn: SqlRunner, run_id: str, memory: Mapping[str, Any], after_seq: int
) -> dict[str, Any]:
    """Working memory after the last checkpoint, from ``memory`` as it was after checkpoint
    ``after_seq`` (reads only the checkpoints added since)."""
    return _apply_checkpoints(
        run_id, dict(memory), checkpoints_repo.since(conn, run_id, after_seq + 1)
    )


def _apply_checkpoints(run_id: str, memory: dict[str, Any], rows: Any) -> dict[str, Any]:
    for row in rows:
        check_format_version("checkpoint", f"{run_id}#{row.seq}", int(row.format_version))
        delta = json.loads(row.memory_delta_json)
        if not _checksum_ok(row.transition, row.memory_delta_json, row.checksum):
            raise PersistenceError(
                f"checkpoint {row.seq} of run {run_id} fails its checksum",
                code="store.corrupt",
                run_id=run_id,
            )
        if row.is_snapshot:
            memory = dict(delta)
        else:
            memory.update(delta)
    return memory


def checkpoint_checksum(transition: str, delta_json: str) -> str:
    """``digest_json({"transition": transition, "delta": delta_json})``, with the canonical
    text of that two-key object written out (it is taken once per task transition)."""
    text = '{"delta":' + _json_string(delta_json) + ',"transition":' + _json_string(transition)
    return digest_bytes((text + "}").encode("utf-8"))


def _delta_json(delta: Mapping[str, Any]) -> str:
    return canonical_json(dict(delta)) if delta else "{}"


def _checksum_ok(transition: str, delta_json: str, checksum: str) -> bool:
    return checkpoint_checksum(transition, delta_json) == checksum


class RunLog:
    """Writes for one run by its owner: transitions, checkpoints and audit events.

    ``lane``: the log of a claimed task's execution (a worker's, engine/run/claimed_tasks.py):
    that task's events go to its claim's lane, which the run's owner adopts into the chain
    (observability/audit_lanes.py), not to the chain, so a worker's writes never take the
    run's lock for them."""

    def __init__(
        self,
        run_id: str,
        *,
        checkpoint_seq: int,
        redact: audit.Redactor | None = None,
        lane: ClaimLane | None = None,
    ) -> None:
        self.run_id = run_id
        self._checkpoint_seq = checkpoint_seq
        self.redact = redact
        self.lane = lane

    @classmethod
    def open(cls, conn: SqlRunner, run_id: str, redact: audit.Redactor | None = None) -> RunLog:
        checkpoint_seq = checkpoints_repo.last_seq(conn, run_id)
        return cls(run_id, checkpoint_seq=int(checkpoint_seq or 0), redact=redact)

    def event(
        self,
        conn: SqlRunner,
        kind: str,
        payload: Any,
        *,
        now: datetime,
        task_id: str | None = None,
        effect_id: str | None = None,
    ) -> None:
        """Append to the chain; the head is read inside this write transaction because
        operators (cancel, reconcile, approvals) append to a live run's chain too. An event
        of a claimed task goes to its claim's lane instead (the one home of that rule);
        anything else a worker appends (another task's) takes the chain's way, locked."""
        lane = self.lane
        if lane is not None and task_id == lane.task_id:
            lane.append(conn, kind, payload, now=now, effect_id=effect_id, redact=self.redact)
            return
        audit.append_to_chain(
            conn,
            self.run_id,
            kind,
            payload,
            now=now,
            task_id=task_id,
            effect_id=effect_id,
            redact=self.redact,
        )

    def checkpoint(
        self,
        conn: SqlRunner,
        transition: str,
        delta: Mapping[str, Any],
        memory: Mapping[str, Any],
        *,
        now: datetime,
    ) -> int:
        row = self._checkpoint_row(transition, delta, memory, now)
        checkpoints_repo.insert_many(conn, [row])
        return row[1]

    def _checkpoint_row(
        self, transition: str, delta: Mapping[str, Any], memory: Mapping[str, Any], now: datetime
    ) -> tuple[str, int, str, str, bool, str, datetime]:
        """The next checkpoint's row (its sequence number taken)."""
        seq = self._checkpoint_seq + 1
        snapshot = seq % SNAPSHOT_EVERY == 0
        delta_json = canonical_json(dict(memory)) if snapshot else _delta_json(delta)
        transition = transition[:600]
        checksum = checkpoint_checksum(transition, delta_json)
        self._checkpoint_seq = seq
        return (self.run_id, seq, transition, delta_json, snapshot, checksum, now)

    def transitions(self, conn: SqlRunner | None) -> TransitionWrites:
        """The writes of a batch of task transitions inside ``conn``'s write transaction
        (None: made before it, ``conn`` set before the first :meth:`~TransitionWrites.flush`)."""
        return TransitionWrites(self, conn)

    def set_task(self, conn: SqlRunner, task_id: str, **values: Any) -> None:
        guarded_update(conn, "task", (self.run_id, task_id), values)

    def set_run(self, conn: SqlRunner, **values: Any) -> None:
        guarded_update(conn, "run", (self.run_id,), values)


class TransitionWrites:
    """A batch's task transitions inside one write transaction, each written whole — its
    task row, its checkpoint, its chained audit event — but by statement rather than by
    task: :meth:`flush` runs the batch's row updates, checkpoints and events as one driver
    call each (``executemany``), and the chain's head is read once
    (:class:`~agentctl.observability.audit.ChainAppends`). They commit together or not at
    all, as the same statements one by one would.

    Anything else the transaction writes for these tasks (a second update of a row, an
    event appended by other code) comes after a :meth:`flush`, and the last flush comes
    before the commit: nothing waits in here when the transaction ends.

    Nothing but :meth:`flush` touches the store, so the batch's rows, checkpoints and event
    payloads can be made before its transaction begins (``conn`` None until then): the
    transaction then runs its statements nearly back to back, and holds the write lock
    for less time. An event is chained (the head read, its digest taken) at the flush."""

    def __init__(self, log: RunLog, conn: SqlRunner | None) -> None:
        self.log = log
        self.conn: Any = conn
        self._tasks: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self._checkpoints: list[tuple[str, int, str, str, bool, str, datetime]] = []
        self._events = audit.ChainAppends(log.run_id, log.redact)
        self._pending: list[tuple[str, str, datetime, str]] = []

    def set_task(self, task_id: str, values: dict[str, Any]) -> None:
        self._tasks.append(((self.log.run_id, task_id), values))

    def checkpoint(
        self, transition: str, delta: Mapping[str, Any], memory: Mapping[str, Any], now: datetime
    ) -> None:
        self._checkpoints.append(self.log._checkpoint_row(transition, delta, memory, now))  # noqa: SLF001 - its log's sequence

    def event(self, kind: str, payload: Any, *, now: datetime, task_id: str) -> None:
        self._pending.append((kind, self._events.encode(payload), now, task_id))

    def flush(self) -> None:
        """Write everything given since the last flush, in the order of the tasks."""
        conn = self.conn
        tasks, self._tasks = self._tasks, []
        checkpoints, self._checkpoints = self._checkpoints, []
        pending, self._pending = self._pending, []
        events = self._events
        for kind, payload_json, now, task_id in pending:
            events.append_encoded(conn, kind, payload_json, now=now, task_id=task_id)
        guarded_updates(conn, "task", tasks)
        if checkpoints:
            checkpoints_repo.insert_many(conn, checkpoints)
        events.flush(conn)


@dataclass
class Attempt:
    """One attempt of one task: effect ordinals count up from 1 in dispatch order."""

    run_id: str
    task_id: str
    attempt: int
    ordinal: int = 0
    effect_ids: list[str] = field(default_factory=list)

    def next_ordinal(self) -> int:
        self.ordinal += 1
        return self.ordinal
