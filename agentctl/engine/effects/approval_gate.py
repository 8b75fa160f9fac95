"""The approval step of the effect protocol: what happens to an effect journaled
``requested`` whose approval mode gates it (docs/durable-execution.md, "The effect
protocol"; the modes in docs/workflow-language.md).

A person approves it at the terminal (the answer commits with the approval record), or
the run pauses with the effect ``waiting_for_approval`` until an operator answers, or the
policy's ``nonInteractive`` mode refuses it. An approved effect goes on to ``started`` and
its dispatch through the gate (:meth:`EffectGate._start_and_dispatch`); a rejected one is
concluded ``cancelled`` and never dispatched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentctl.engine.core.records import Attempt
from agentctl.engine.effects import journal
from agentctl.engine.effects.approval_policy import non_interactive_mode
from agentctl.engine.effects.approvals import create_approval, get_approval, resolve_approval
from agentctl.engine.effects.tracing import approval_wait, approval_waited
from agentctl.error_codes import ErrorCode
from agentctl.ids import approval_id
from agentctl.signals import ApprovalPending, TaskFailure
from agentctl.store.states import ApprovalState, EffectState

if TYPE_CHECKING:
    from agentctl.engine.effects.gate import EffectGate

__all__ = ["after_approval", "gate_effect", "gate_requested"]


async def gate_effect(
    gate: EffectGate,
    attempt: Attempt,
    record: journal.EffectRecord,
    spec: journal.EffectSpec,
    dispatch: Callable[[str], Awaitable[Any]],
    prompt: str | None,
) -> Any:
    """Ask for the approval of a ``requested`` effect; dispatch it once approved."""
    aid = approval_id(record.id)
    text = prompt or f"allow {spec.operation} ({spec.effect_class}, risk {spec.risk})?"
    request = {
        "approvalId": aid,
        "runId": attempt.run_id,
        "taskId": attempt.task_id,
        "effectId": record.id,
        "operation": spec.operation,
        "effectClass": spec.effect_class,
        "risk": spec.risk,
        "prompt": text,
        "input": spec.effect_input,
    }

    def store_approval(conn: Any, now: Any) -> None:
        create_approval(
            conn,
            approval_id=aid,
            run_id=attempt.run_id,
            task_id=attempt.task_id,
            kind="approval",
            prompt=text,
            now=now,
            effect_id=record.id,
            risk=spec.risk,
            input=spec.effect_input,
        )

    if gate.approver is not None:
        allowed = await approval_wait(gate.approver, request)
        now = gate.clock.now()
        with gate.store.write() as conn:
            store_approval(conn, now)
            resolve_approval(
                conn,
                aid,
                status=ApprovalState.APPROVED if allowed else ApprovalState.REJECTED,
                actor="terminal",
                reason="answered at the terminal",
                now=now,
            )
            gate.log.event(
                conn,
                "approval.resolved",
                {"approvalId": aid, "approved": allowed, "actor": "terminal"},
                now=now,
                task_id=attempt.task_id,
                effect_id=record.id,
            )
        if not allowed:
            return _reject(gate, attempt, record, aid)
        return await gate._start_and_dispatch(attempt, record, spec, dispatch)

    mode = non_interactive_mode(gate.policy)
    now = gate.clock.now()
    if mode in ("deny_approval", "fail"):
        message = (
            f"policy denied effect: {spec.operation} needs approval and "
            f"policy.nonInteractive is {mode}"
        )
        with gate.store.write() as conn:
            gate._refuse(
                conn,
                attempt,
                record.id,
                status=EffectState.FAILED,
                code=ErrorCode.POLICY_DENIED,
                message=message,
                event="effect.denied",
                payload={"reason": message},
                now=now,
            )
        raise TaskFailure(message, code=ErrorCode.POLICY_DENIED)
    with gate.store.write() as conn:
        journal.set_status(conn, record.id, EffectState.WAITING_FOR_APPROVAL, now)
        store_approval(conn, now)
        gate.log.event(
            conn,
            "approval.requested",
            request,
            now=now,
            task_id=attempt.task_id,
            effect_id=record.id,
        )
    raise ApprovalPending(aid)


async def after_approval(
    gate: EffectGate,
    attempt: Attempt,
    record: journal.EffectRecord,
    spec: journal.EffectSpec,
    dispatch: Callable[[str], Awaitable[Any]],
) -> Any:
    """Go on with an effect found ``waiting_for_approval``: still pending, approved
    (dispatched) or rejected (concluded ``cancelled``)."""
    aid = approval_id(record.id)
    with gate.store.read() as conn:
        approval = get_approval(conn, aid)
    if approval is None or approval.status == ApprovalState.PENDING:
        raise ApprovalPending(aid)
    approval_waited(approval, record.operation)
    if approval.status != ApprovalState.APPROVED:
        return _reject(gate, attempt, record, aid)
    return await gate._start_and_dispatch(attempt, record, spec, dispatch)


async def gate_requested(
    gate: EffectGate,
    attempt: Attempt,
    record: journal.EffectRecord,
    spec: journal.EffectSpec,
    dispatch: Callable[[str], Awaitable[Any]],
    prompt: str | None,
) -> Any:
    """Go on with a gated effect found ``requested`` (its process stopped before it moved
    on): asked for when no approval of it was recorded, else followed as that approval
    says (one answered at the terminal commits before the effect moves to ``started``)."""
    with gate.store.read() as conn:
        recorded = get_approval(conn, approval_id(record.id))
    if recorded is None:
        return await gate_effect(gate, attempt, record, spec, dispatch, prompt)
    return await after_approval(gate, attempt, record, spec, dispatch)


def _reject(gate: EffectGate, attempt: Attempt, record: journal.EffectRecord, aid: str) -> Any:
    now = gate.clock.now()
    message = f"approval rejected: {aid}"
    with gate.store.write() as conn:
        gate._refuse(
            conn,
            attempt,
            record.id,
            status=EffectState.CANCELLED,
            code=ErrorCode.APPROVAL_REJECTED,
            message=message,
            event="effect.cancelled",
            payload={"reason": message},
            now=now,
        )
    raise TaskFailure(message, code=ErrorCode.APPROVAL_REJECTED, stops_run=True)
