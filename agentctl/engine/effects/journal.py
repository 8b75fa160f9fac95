"""The effect journal: every non-pure operation, before and after dispatch.

Status moves ``requested`` -> (``waiting_for_approval`` ->) ``started`` -> ``succeeded`` |
``failed`` | ``cancelled`` | ``uncertain``; an effect that needs no approval is journaled
``started`` (nothing waits between its journal and its dispatch). A started effect whose
outcome is unknown (crash, timeout, transport loss, cancellation after dispatch) becomes
``uncertain`` and blocks its task until an operator appends a reconciliation: ``applied``
(with a validated result), ``not_applied`` or ``compensated``. Reconciliations are
append-only; the latest wins.

These functions run inside the caller's transaction; the executor decides what commits
together.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from agentctl.compiler.effects import EffectSpec as Classification
from agentctl.compiler.effects import kind_effect
from agentctl.digest import canonical_json, effect_id, effect_input_digest, identity_json
from agentctl.engine.core.records import RunRow
from agentctl.engine.effects import budget
from agentctl.error_codes import ErrorCode
from agentctl.errors import NotFoundError
from agentctl.observability import telemetry
from agentctl.signals import TaskFailure
from agentctl.store import effects_repo, reconciliations_repo
from agentctl.store.effects_repo import EffectRecord
from agentctl.store.engine import SqlRunner
from agentctl.store.reconciliations_repo import Reconciliation, ReconciliationStatus
from agentctl.store.states import EffectState
from agentctl.store.transitions import guarded_update

__all__ = [
    "COMPENSATION_INPUT",
    "REMOTE_TASK_EVENT",
    "mark_compensated",
    "EffectRecord",
    "EffectSpec",
    "Reconciliation",
    "ReconciliationStatus",
    "add_reconciliation",
    "finish_effect",
    "get_effect",
    "insert_requested",
    "journal_if_position_empty",
    "request_effect",
    "journaled_effect",
    "latest_reconciliation",
    "list_effects",
    "note_remote_task",
    "record_tool_call",
    "remote_task",
    "require_effect",
    "set_status",
]

#: The input key under which a compensation run records which source effects each of its
#: tasks undoes (written by the compensation planner, read when the task commits).
COMPENSATION_INPUT = "__agentctlCompensation"
#: The audit event that journals the handle a remote peer gave an in-flight effect (an A2A
#: task id): the one record ``effects continue-remote`` follows the remote work by.
REMOTE_TASK_EVENT = "effect.remote_task"
TERMINAL_EFFECT_STATUSES = frozenset(
    {EffectState.SUCCEEDED, EffectState.FAILED, EffectState.CANCELLED}
)
#: The states an effect is concluded in by the gate (an uncertain one may still be
#: reconciled by an operator).
ConcludedEffectState = Literal[
    EffectState.SUCCEEDED, EffectState.FAILED, EffectState.CANCELLED, EffectState.UNCERTAIN
]


@dataclass(frozen=True, slots=True)
class EffectSpec:
    """What a task is about to do: the operation, its input, and how the effect table
    classifies it (docs/durable-execution.md)."""

    operation: str
    effect_input: Any
    effect_class: str
    idempotency: str
    risk: str
    policy_label: str
    request: Any = None

    def input_digest(self) -> str:
        return effect_input_digest(self.effect_input)

    def stored_request(self) -> Any:
        """What the journal keeps as the effect's request."""
        return self.request if self.request is not None else self.effect_input

    @classmethod
    def classified(
        cls,
        row: str | Classification,
        effect_input: Any,
        *,
        idempotency: str | None = None,
        request: Any = None,
    ) -> EffectSpec:
        """The effect of an action kind (``row`` names it) or of a row of the compiler's
        effect table: class, risk, idempotency and label come from that one table.
        ``idempotency`` is what an action declared, where its kind lets it."""
        if isinstance(row, str):
            row = kind_effect(row)
        return cls(
            operation=row.operation,
            effect_input=effect_input,
            effect_class=row.effect_class,
            idempotency=idempotency or row.idempotency,
            risk=row.risk,
            policy_label=row.policy_label,
            request=request,
        )

    def effect_id(self, run_id: str, task_id: str, attempt: int, ordinal: int) -> str:
        return effect_id(run_id, task_id, attempt, ordinal, self.operation, self.input_digest())


def _dumps(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def get_effect(conn: SqlRunner, effect_id_: str) -> EffectRecord | None:
    return effects_repo.effect(conn, effect_id_)


def require_effect(conn: SqlRunner, effect_id_: str) -> EffectRecord:
    found = get_effect(conn, effect_id_)
    if found is None:
        matches = (
            effects_repo.effect_ids_with_prefix(conn, effect_id_, 2) if len(effect_id_) >= 8 else []
        )
        if len(matches) == 1:
            found = get_effect(conn, matches[0])
    if found is None:
        raise NotFoundError(
            f"unknown effect {effect_id_!r}",
            hint="list a run's effects with `agentctl effects list RUN_ID`",
        )
    return found


def list_effects(
    conn: SqlRunner,
    run_id: str,
    *,
    task_id: str | None = None,
    statuses: tuple[str, ...] = (),
) -> list[EffectRecord]:
    return effects_repo.effects(conn, run_id, task_id=task_id, statuses=statuses)


@dataclass(frozen=True, slots=True)
class Journaled:
    """The effect found at an attempt's position, and whether it is the request at hand."""

    record: EffectRecord
    same_request: bool


def journaled_effect(
    conn: SqlRunner, run_id: str, task_id: str, attempt: int, ordinal: int, spec: EffectSpec
) -> Journaled | None:
    """The effect journaled at ``(run, task, attempt, ordinal)``, or None.

    A position holds one effect. It is the same work as ``spec`` when its id is the one
    ``spec`` derives, or when the operation and the stored request are equal in canonical
    form: an effect journaled by a release whose ids hashed the request in the order its
    keys were built is recognised that way, keeps its id (and so its approval and its
    idempotency key) and is never dispatched a second time (docs/durable-execution.md).
    """
    record = effects_repo.effect_at(conn, run_id, task_id, attempt, ordinal)
    if record is None:
        return None
    if record.id == spec.effect_id(run_id, task_id, attempt, ordinal):
        return Journaled(record, True)
    same = record.operation == spec.operation and identity_json(record.request) == identity_json(
        spec.stored_request()
    )
    return Journaled(record, same)


def insert_requested(
    conn: SqlRunner,
    *,
    run_id: str,
    task_id: str,
    attempt: int,
    ordinal: int,
    spec: EffectSpec,
    now: datetime,
) -> EffectRecord:
    """Journal an effect as ``requested``; the effect already at that position is returned
    as is when it is the same request, and a different one is refused (one effect per
    position, whoever calls)."""
    return request_effect(
        conn, run_id=run_id, task_id=task_id, attempt=attempt, ordinal=ordinal, spec=spec, now=now
    )[0]


def request_effect(
    conn: SqlRunner,
    *,
    run_id: str,
    task_id: str,
    attempt: int,
    ordinal: int,
    spec: EffectSpec,
    now: datetime,
) -> tuple[EffectRecord, bool]:
    """:func:`insert_requested`, and whether this call inserted the row (False: the same
    request was journaled there before, and may hold a reservation already)."""
    inserted = journal_if_position_empty(
        conn, run_id=run_id, task_id=task_id, attempt=attempt, ordinal=ordinal, spec=spec, now=now
    )
    if inserted is not None:
        return inserted, True
    found = journaled_effect(conn, run_id, task_id, attempt, ordinal, spec)
    if found is None:  # pragma: no cover - the insert saw an effect there
        raise RuntimeError(f"effect position {ordinal} of task {task_id} changed under a write")
    if not found.same_request:
        raise nondeterministic(found.record, spec)
    return found.record, False


def journal_if_position_empty(
    conn: SqlRunner,
    *,
    run_id: str,
    task_id: str,
    attempt: int,
    ordinal: int,
    spec: EffectSpec,
    now: datetime,
    started: bool = False,
) -> EffectRecord | None:
    """Journal ``spec`` as ``requested`` unless an effect is journaled at its position
    already: the position's read and the insert are one statement. None: something is
    there (:func:`journaled_effect` says what) and nothing was written.

    ``started``: journal it ``started`` instead, for an effect nothing waits for between
    its journal and its dispatch (no approval): the gate's one commit before the dispatch
    (docs/durable-execution.md, "The effect protocol")."""
    eid = spec.effect_id(run_id, task_id, attempt, ordinal)
    requested = EffectRecord(
        id=eid,
        run_id=run_id,
        task_id=task_id,
        attempt=attempt,
        ordinal=ordinal,
        operation=spec.operation,
        input_digest=spec.input_digest(),
        effect_class=spec.effect_class,
        idempotency=spec.idempotency,
        risk=spec.risk,
        idempotency_key=eid,  # an effect's idempotency key is its id
        status=EffectState.STARTED if started else EffectState.REQUESTED,
        confirmed=False,
        request=spec.stored_request(),
        result=None,
        error=None,
        requested_at=now,
        started_at=now if started else None,
        finished_at=None,
    )
    return effects_repo.insert_effect_at_empty_position(
        conn, requested, trace_ids=telemetry.active().current_ids()
    )


def nondeterministic(record: EffectRecord, spec: EffectSpec) -> TaskFailure:
    """The failure for a request that differs from the one journaled at its position."""
    return TaskFailure(
        f"task {record.task_id} attempt {record.attempt} asked for a different "
        f"{spec.operation} at effect position {record.ordinal} than the one journaled there "
        f"(effect {record.id}, {record.operation}, {record.status}); the task's body or its "
        "inputs are not deterministic",
        code=ErrorCode.EFFECT_NONDETERMINISTIC,
        stops_run=True,
        permanent=True,
        details={"effectId": record.id, "operation": spec.operation, "ordinal": record.ordinal},
    )


def record_tool_call(
    conn: SqlRunner,
    run_id: str,
    task_id: str,
    effect_id_: str,
    call: Mapping[str, Any],
    now: datetime,
) -> None:
    """The tool call an agent's effect carries, journaled with the effect's request."""
    effects_repo.insert_tool_call(
        conn,
        effect_id=effect_id_,
        run_id=run_id,
        task_id=task_id,
        tool=str(call["tool"]),
        arguments_json=canonical_json(
            {"callId": call.get("id"), "arguments": call.get("arguments")}
        ),
        now=now,
    )


def set_status(conn: Any, effect_id_: str, status: EffectState, now: datetime) -> None:
    values: dict[str, Any] = {"status": status}
    if status == EffectState.STARTED:
        values["started_at"] = now
    elif status in TERMINAL_EFFECT_STATUSES or status == EffectState.UNCERTAIN:
        values["finished_at"] = now
    guarded_update(conn, "effect", (effect_id_,), values)


def finish_effect(
    conn: Any,
    effect_id_: str,
    *,
    status: ConcludedEffectState,
    now: datetime,
    result: Any = None,
    error: Any = None,
    confirmed: bool,
    dispatched: bool = True,
) -> None:
    """Conclude an effect. ``dispatched=False``: it never was (refused in the transaction
    that journaled it ``started``), so it keeps no start time."""
    values: dict[str, Any] = {
        "status": status,
        "result_json": _dumps(result),
        "error_json": _dumps(error),
        "confirmed": confirmed,
        "finished_at": now,
    }
    if not dispatched:
        values["started_at"] = None
    guarded_update(conn, "effect", (effect_id_,), values)


def latest_reconciliation(conn: SqlRunner, effect_id_: str) -> Reconciliation | None:
    return reconciliations_repo.latest_reconciliation(conn, effect_id_)


def list_reconciliations(conn: SqlRunner, effect_id_: str) -> list[Reconciliation]:
    return reconciliations_repo.reconciliations(conn, effect_id_)


def add_reconciliation(
    conn: SqlRunner,
    effect_id_: str,
    *,
    status: ReconciliationStatus,
    reason: str,
    actor: str,
    now: datetime,
    evidence: str | None = None,
    result: Any = None,
    result_validated: bool = False,
    compensation_effect_id: str | None = None,
) -> Reconciliation:
    previous = latest_reconciliation(conn, effect_id_)
    conclusion = reconciliations_repo.insert_reconciliation(
        conn,
        effect_id_,
        status=status,
        reason=reason,
        actor=actor,
        evidence=evidence,
        result_json=_dumps(result),
        result_validated=result_validated,
        compensation_effect_id=compensation_effect_id,
        supersedes_id=None if previous is None else previous.id,
        now=now,
    )
    # The conclusion settles the budget the effect reserved, in the same transaction: no
    # reconciliation can be appended without it (docs/budgets.md).
    effect = require_effect(conn, effect_id_)
    budget.conclude(
        conn,
        effect.run_id,
        effect.id,
        consumed=status != "not_applied",
        outcome_recorded=effect.status in TERMINAL_EFFECT_STATUSES,
        now=now,
    )
    return conclusion


def mark_compensated(conn: Any, run: RunRow, task_id: str, effect_ids: list[str], now: Any) -> None:
    """Append ``compensated`` to every source effect this task undid, in its commit."""
    from agentctl.observability.audit import append_event

    mapping = (run.inputs.get(COMPENSATION_INPUT) or {}).get(task_id) or {}
    inverse = effect_ids[-1] if effect_ids else None
    source = run.source_run_id
    for undone in mapping.get("effects") or []:
        reconciliations_repo.append_compensated(
            conn,
            undone,
            reason=f"compensated by {run.id} task {task_id}",
            actor="agentctl",
            compensation_effect_id=inverse,
            now=now,
        )
        if source is not None:
            append_event(
                conn,
                source,
                "effect.compensated",
                {"compensationRunId": run.id, "task": task_id, "inverseEffectId": inverse},
                now=now,
                task_id=mapping.get("sourceTaskId"),
                effect_id=undone,
            )


def note_remote_task(
    conn: SqlRunner,
    log: Any,
    effect: EffectRecord | str,
    handle: Mapping[str, Any],
    *,
    task_id: str,
    now: datetime,
) -> None:
    """Journal the remote peer's handle for an effect still in flight (an A2A task id), in
    the run's audit chain: a later process follows the remote work by it instead of
    dispatching the effect again (docs/protocols.md, "Continuing a delegation")."""
    effect_id_ = effect if isinstance(effect, str) else effect.id
    log.event(conn, REMOTE_TASK_EVENT, dict(handle), now=now, task_id=task_id, effect_id=effect_id_)


def remote_task(conn: SqlRunner, effect: EffectRecord) -> dict[str, Any] | None:
    """The handle :func:`note_remote_task` journaled for ``effect`` (the latest), or None."""
    from agentctl.observability.audit import list_events
    from agentctl.observability.audit_lanes import pending_events

    found: dict[str, Any] | None = None
    for event in list_events(conn, effect.run_id):
        if event.kind == REMOTE_TASK_EVENT and event.effect_id == effect.id:
            found = dict(event.payload) if isinstance(event.payload, Mapping) else None
    # A claimed task's events wait in its claim's lane until the run's owner adopts them
    # (observability/audit_lanes.py): later than the chain's, so read after it.
    for row in pending_events(conn, effect.run_id):
        if row.kind == REMOTE_TASK_EVENT and row.effect_id == effect.id:
            payload = json.loads(row.payload_json)
            found = dict(payload) if isinstance(payload, Mapping) else None
    return found
