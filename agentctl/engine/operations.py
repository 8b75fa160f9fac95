"""Operator operations on stored runs: cancel, reconcile, approvals, inspect, list.

Each is one short transaction that appends what a person decided; the executor reads those
decisions when the run is next resumed. None of them dispatches an effect.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentctl import hints
from agentctl.engine.actions.questions import validate_answer
from agentctl.engine.core.records import TERMINAL_RUN_STATES, RunLog, RunRow, load_run, load_tasks
from agentctl.engine.effects import journal
from agentctl.engine.effects.approvals import list_approvals, require_approval, resolve_approval
from agentctl.engine.effects.budget import snapshot as budget_snapshot
from agentctl.engine.next_steps import after_conclusion, for_run
from agentctl.engine.run.retrying import retry_history
from agentctl.engine.run.timing import parked_intervals, split_time
from agentctl.errors import BlockedError, UsageError
from agentctl.ids import Clock
from agentctl.input_files import read_input_text
from agentctl.json_schemas import compile_schema, first_error
from agentctl.json_text import parse_json_text
from agentctl.observability.audit import AuditEvent, ChainReport, events_and_chain
from agentctl.store import (
    checkpoints_repo,
    dashboard_repo,
    effects_repo,
    inspect_repo,
    schedules_repo,
    sessions_repo,
)
from agentctl.store.conditions import task_conditions
from agentctl.store.engine import SqlRunner, Store
from agentctl.store.ownership import clear_owner, owner_alive
from agentctl.store.records import check_run_records
from agentctl.store.states import ApprovalState
from agentctl.store.timestamps import to_iso
from agentctl.store.transitions import close_live_parts

__all__ = [
    "answer_question",
    "cancel_run",
    "decide_approval",
    "inspect_run",
    "reconcile_effect",
]

MAX_EVIDENCE_BYTES = 1 << 20


def cancel_run(
    store: Store, run_id: str, reason: str | None, *, clock: Clock, actor: str = "cli-user"
) -> dict[str, Any]:
    """Set the durable cancel flag; a run nobody executes is cancelled at once."""
    now = clock.now()
    with store.write() as conn:
        run = load_run(conn, run_id)
        if run.status in TERMINAL_RUN_STATES:
            return {
                "runId": run_id,
                "state": run.status,
                "cancelRequested": False,
                "note": f"run is already {run.status}",
            }
        log = RunLog.open(conn, run_id)
        message = reason or "cancelled by operator"
        log.set_run(conn, cancel_requested=True, cancel_reason=message, updated_at=now)
        live = run.owner_id is not None and owner_alive(run.owner_id)
        log.event(
            conn,
            "run.cancel_requested",
            {"reason": reason, "ownerLive": live, "actor": actor},
            now=now,
        )
        if not live:
            # Nobody executes it: end it now, fencing out any owner that might come back.
            clear_owner(conn, run_id)
            log.set_run(
                conn,
                status="cancelled",
                error_json=json.dumps({"code": "run.cancelled", "message": message}),
            )
            close_live_parts(conn, run_id, now)
            log.event(conn, "run.cancelled", {"reason": reason}, now=now)
            return {"runId": run_id, "state": "cancelled", "cancelRequested": True}
    return {
        "runId": run_id,
        "state": run.status,
        "cancelRequested": True,
        "note": f"the owning process ({run.owner_id}) will stop and exit 130",
    }


@dataclass(frozen=True)
class ReconcileRequest:
    effect_id: str
    status: str
    reason: str
    actor: str = "cli-user"
    evidence_file: str | None = None
    result_file: str | None = None
    result_schema_file: str | None = None
    compensation_effect_id: str | None = None
    # The same, given directly (the Python API) instead of as files; a file wins.
    evidence: str | None = None
    result: Any = None
    result_schema: dict[str, Any] | None = None


def _read_small(path: str, what: str) -> str:
    return read_input_text(path, what, limit=MAX_EVIDENCE_BYTES)


def _load_json_file(path: str, what: str) -> Any:
    try:
        return parse_json_text(_read_small(path, what))
    except ValueError as exc:
        raise UsageError(f"{what} {path} is not valid JSON: {exc}") from exc


def reconcile_effect(store: Store, request: ReconcileRequest, *, clock: Clock) -> dict[str, Any]:
    """Append an operator's conclusion about an effect (never rewrites history)."""
    status = request.status.replace("-", "_")
    if status not in ("applied", "not_applied", "compensated"):
        raise UsageError(
            f"--status must be applied, not-applied or compensated, got {request.status!r}"
        )
    if not request.reason.strip():
        raise UsageError("--reason must say why (it is kept in the audit log)")
    evidence = (
        _read_small(request.evidence_file, "evidence file")
        if request.evidence_file
        else request.evidence
    )
    result = request.result
    validated = False
    if request.result_file:
        result = _load_json_file(request.result_file, "result file")
    if (
        status == "applied"
        and result is not None
        and (request.result_schema_file or request.result_schema is not None)
    ):
        schema: Any = (
            _load_json_file(request.result_schema_file, "result schema file")
            if request.result_schema_file
            else request.result_schema
        )
        # Compiled by the one home of schemas: references stay inside the schema, so an
        # operator's schema never reads a local file or fetches a URL (docs/json-schemas.md).
        mismatch = first_error(compile_schema(schema, "the result schema"), result)
        if mismatch is not None:
            raise UsageError(
                f"the result does not satisfy the schema at {mismatch.where}: {mismatch.message}",
                hint="fix the result file or the schema",
            )
        validated = True
    now = clock.now()
    with store.write() as conn:
        effect = journal.require_effect(conn, request.effect_id)
        run = load_run(conn, effect.run_id)
        if (
            run.status not in TERMINAL_RUN_STATES
            and run.owner_id is not None
            and owner_alive(run.owner_id)
        ):
            raise BlockedError(
                f"effect {effect.id} belongs to run {run.id}, which a live process "
                f"({run.owner_id}) is executing; its outcome is not known yet",
                code="effect.in_flight",
                hint="wait for the run to stop, or stop it with "
                + hints.quoted(hints.cancel(run.id)),
                run_id=run.id,
            )
        _refuse_contradiction(effect, status)
        if status == "applied" and result is None:
            result = effect.result
        if effect.status in ("requested", "waiting_for_approval"):
            raise UsageError(
                f"effect {effect.id} never started ({effect.status}); there is nothing to "
                "reconcile",
                hint=f"resume the run with {hints.quoted(hints.resume(effect.run_id))}",
            )
        if status == "applied" and result is None and effect.status != "succeeded":
            raise UsageError(
                f"effect {effect.id} has no recorded result; an `applied` conclusion needs one",
                hint="pass --result-file with the result the operation produced (and "
                "--result-schema-file to validate it)",
            )
        conclusion = journal.add_reconciliation(
            conn,
            effect.id,
            status=status,  # type: ignore[arg-type]
            reason=request.reason,
            actor=request.actor,
            now=now,
            evidence=evidence,
            result=result,
            result_validated=validated,
            compensation_effect_id=request.compensation_effect_id,
        )
        log = RunLog.open(conn, effect.run_id)
        log.event(
            conn,
            "effect.reconciled",
            {
                "status": status,
                "actor": request.actor,
                "reason": request.reason,
                "resultValidated": validated,
            },
            now=now,
            task_id=effect.task_id,
            effect_id=effect.id,
        )
    return {
        "effect": effect.to_json(),
        "reconciliation": conclusion.to_json(),
        "next": [step.to_json() for step in after_conclusion(store, effect.run_id)],
    }


def _refuse_contradiction(effect: journal.EffectRecord, status: str) -> None:
    """A conclusion may settle what is unknown, never contradict what the journal knows."""
    if effect.status == "succeeded" and effect.confirmed and status == "not_applied":
        contradiction = "its success was confirmed when it returned"
    elif effect.status in ("failed", "cancelled") and status in ("applied", "compensated"):
        contradiction = f"it was recorded {effect.status}: it never took effect"
    else:
        return
    raise UsageError(
        f"effect {effect.id} cannot be reconciled as {status.replace('_', '-')}: {contradiction}",
        code="effect.contradicts_record",
        hint="only started or uncertain effects need a conclusion; list them with "
        + hints.quoted(hints.reconcile_list(effect.run_id)),
    )


def decide_approval(
    store: Store, approval_id: str, *, approve: bool, reason: str, actor: str, clock: Clock
) -> dict[str, Any]:
    now = clock.now()
    with store.write() as conn:
        current = require_approval(conn, approval_id)
        if current.kind == "question":
            raise UsageError(
                f"{approval_id} is a question",
                hint=f"answer it with {hints.quoted(hints.answer(approval_id))}",
            )
        # The same decision again is answered as a no-op: the approval row keeps the first
        # decision, so the audit chain must not gain a second resolution either.
        unchanged = current.status != ApprovalState.PENDING
        decided = resolve_approval(
            conn,
            approval_id,
            status=ApprovalState.APPROVED if approve else ApprovalState.REJECTED,
            actor=actor,
            reason=reason,
            now=now,
        )
        if not unchanged:
            RunLog.open(conn, decided.run_id).event(
                conn,
                "approval.resolved",
                {"approvalId": approval_id, "approved": approve, "actor": actor, "reason": reason},
                now=now,
                task_id=decided.task_id,
                effect_id=decided.effect_id,
            )
    return {
        "approval": decided.to_json(),
        "unchanged": unchanged,
        "next": [step.to_json() for step in for_run(store, decided.run_id)],
    }


def answer_question(
    store: Store, approval_id: str, raw_value: str, *, actor: str, clock: Clock
) -> dict[str, Any]:
    try:
        value: Any = parse_json_text(raw_value)
    except ValueError:
        value = raw_value
    now = clock.now()
    with store.write() as conn:
        current = require_approval(conn, approval_id)
        if current.kind != "question":
            raise UsageError(
                f"{approval_id} is an approval, not a question",
                hint=f"approve it with {hints.quoted(hints.approve(approval_id))}, or reject it "
                f"with {hints.quoted(hints.reject(approval_id))}",
            )
        validate_answer(value, current.choices, current.answer_schema)
        unchanged = current.status != ApprovalState.PENDING
        answered = resolve_approval(
            conn,
            approval_id,
            status=ApprovalState.ANSWERED,
            actor=actor,
            reason=None,
            answer=value,
            now=now,
        )
        if not unchanged:
            RunLog.open(conn, answered.run_id).event(
                conn,
                "question.answered",
                {"approvalId": approval_id, "actor": actor},
                now=now,
                task_id=answered.task_id,
            )
    return {
        "approval": answered.to_json(),
        "unchanged": unchanged,
        "next": [step.to_json() for step in for_run(store, answered.run_id)],
    }


def _task_times(started: datetime | None, finished: datetime | None) -> dict[str, Any]:
    took = None if started is None or finished is None else (finished - started).total_seconds()
    return {
        "startedAt": started.isoformat() if started else None,
        "finishedAt": finished.isoformat() if finished else None,
        "durationSeconds": None if took is None else round(took, 3),
    }


def _trace_json(ids: tuple[str, str] | None) -> dict[str, str | None]:
    """The ``traceId``/``spanId`` of a record (null when telemetry was off)."""
    return {"traceId": ids[0] if ids else None, "spanId": ids[1] if ids else None}


def inspect_run(store: Store, run_id: str) -> dict[str, Any]:
    with store.read() as conn:
        run = load_run(conn, run_id)
        events, chain = events_and_chain(conn, run_id)
        return inspect_document(conn, run, events, chain)


def inspect_document(
    conn: SqlRunner,
    run: RunRow,
    events: list[AuditEvent],
    chain: ChainReport,
    task_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """What ``inspect`` reports of a run, from its row and its audit events already read
    in the same transaction (the run page reads them once for everything it shows). With
    ``task_ids``, ``tasks`` holds only those (the run page draws the first hundred of a
    long fan-out, and decoding every output would cost it most of its time)."""
    run_id = run.id
    task_rows = load_tasks(conn, run_id, task_ids)
    # Only the times (every column of every task, unsealed, cost the run page a third of
    # its read).
    times = {
        task_id: (started, finished)
        for task_id, _, _, started, finished in dashboard_repo.task_progress(conn, run_id)
    }
    conditions = task_conditions(conn, run_id)
    effects = journal.list_effects(conn, run_id)
    effect_json = []
    for effect in effects:
        item = effect.to_json()
        item["reconciliations"] = [
            r.to_json() for r in journal.list_reconciliations(conn, effect.id)
        ]
        effect_json.append(item)
    approvals = [a.to_json() for a in list_approvals(conn, run_id)]
    check_run_records(conn, run_id)
    checkpoint_count = checkpoints_repo.count(conn, run_id)
    firing = schedules_repo.firing_of_run(conn, run_id)
    ledger = budget_snapshot(conn, run_id)
    sessions = [
        {"taskId": row[0], "provider": row[1], "state": json.loads(row[2])}
        for row in sessions_repo.sessions(conn, run_id)
    ]
    artifacts = [
        {"name": row[0], "version": row[1], "digest": row[2], "taskId": row[3], "path": row[4]}
        for row in inspect_repo.artifact_listing(conn, run_id)
    ]
    traces = inspect_repo.trace_index(conn, run_id)
    calls = [
        {
            "effectId": row[0],
            "taskId": row[1],
            "tool": row[2],
            "status": row[3],
            "call": json.loads(row[4]),
        }
        for row in effects_repo.tool_calls(conn, run_id)
    ]
    # Time the run spent parked, and the backoffs between attempts, are waiting, not work.
    parked = parked_intervals(events)
    backoffs: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for retry in retry_history(events):
        if retry["taskId"] is not None and isinstance(retry["waitMs"], int | float):
            backoffs[retry["taskId"]].append(
                (datetime.fromisoformat(retry["at"]), float(retry["waitMs"]))
            )
    run_end = None if run.status == "running" else run.updated_at
    return {
        "run": {
            **run.summary_json(),
            **split_time(run.created_at, run_end, parked),
            "workflowDigest": run.workflow_digest,
            "planDigest": run.plan_digest,
            "workflowFile": run.workflow_file,
            "workspace": run.workspace,
            "inputs": run.inputs,
            # The --var/--vars-file values the run was created with (retry reuses them).
            "variables": run.plan.get("variables"),
            "output": run.output,
            "error": run.error,
            "deadlineAt": run.deadline_at.isoformat() if run.deadline_at else None,
            "cancelRequested": run.cancel_requested,
            "owner": run.owner_id,
            **_trace_json(traces.run),
            "startedBy": None
            if firing is None
            else {
                "schedule": firing.schedule_name,
                "slot": to_iso(firing.slot_at),
                "trigger": firing.trigger,
            },
        },
        "tasks": [
            {
                **row.to_json(),
                "condition": conditions.get(task_id),
                **_trace_json(traces.tasks.get(task_id)),
                **_task_times(*times.get(task_id, (None, None))),
                **split_time(*times.get(task_id, (None, None)), parked, backoffs[task_id]),
            }
            for task_id, row in task_rows.items()
        ],
        "effects": [
            {**item, **_trace_json(traces.effects.get(item["effectId"]))} for item in effect_json
        ],
        "approvals": approvals,
        "checkpoints": int(checkpoint_count),
        "budget": ledger,
        "providerSessions": sessions,
        "toolCalls": calls,
        "artifacts": artifacts,
        "retries": retry_history(events),
        "audit": {"events": len(events), "verified": chain.ok, "brokenAt": chain.broken_at},
    }


def traced_effects(
    store: Store, run_id: str, task_id: str | None = None
) -> list[tuple[journal.EffectRecord, tuple[str, str] | None]]:
    """A run's effects (of one task, when given) in request order, each with the
    ``(traceId, spanId)`` of its span (None when telemetry was off): ``effects list``."""
    with store.read() as conn:
        load_run(conn, run_id)
        spans = inspect_repo.trace_index(conn, run_id).effects
        return [(e, spans.get(e.id)) for e in journal.list_effects(conn, run_id, task_id=task_id)]


def stored_plan(store: Store, run_id: str) -> tuple[RunRow, dict[str, str]]:
    """The run with its whole plan, and each task's state: ``inspect --graph``."""
    with store.read() as conn:
        run = load_run(conn, run_id, whole=True)
        states = {task_id: row.status for task_id, row in load_tasks(conn, run_id).items()}
    return run, states


def audit_trail(
    store: Store, run_id: str, *, verify: bool = False
) -> tuple[ChainReport, list[AuditEvent]]:
    """A run's audit events and the check of their hash chain: ``audit``. With ``verify``
    a broken chain is refused (exit 5) before any event is parsed."""
    import dataclasses

    from agentctl.errors import PersistenceError
    from agentctl.observability.audit import list_events, verify_chain
    from agentctl.observability.audit_lanes import verify_lanes

    with store.read() as conn:
        load_run(conn, run_id)
        report = verify_chain(conn, run_id)
        if verify and not report.ok:
            raise PersistenceError(
                f"audit chain of run {run_id} is broken at event {report.broken_at}: "
                f"{report.problem}",
                code="audit.broken",
                hint="the database was modified outside agentctl; keep a copy for investigation",
                run_id=run_id,
            )
        # Claimed tasks' events waiting for the run's owner to adopt them: pending, each
        # lane verified on its own (a broken one is refused as the chain is).
        lanes = verify_lanes(conn, run_id)
        if verify and not lanes.ok:
            raise PersistenceError(
                f"audit lane of task {lanes.task_id} of run {run_id} (claim token "
                f"{lanes.claim_token}) is broken at lane event {lanes.lane_seq}: "
                f"{lanes.problem}",
                code="audit.broken",
                hint="the database was modified outside agentctl; keep a copy for investigation",
                run_id=run_id,
            )
        if lanes.events:
            report = dataclasses.replace(
                report, pending_events=lanes.events, pending_lanes=lanes.lanes
            )
        return report, list_events(conn, run_id)
