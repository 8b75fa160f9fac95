"""The effect protocol around one dispatch (docs/durable-execution.md; policy in
docs/workflow-language.md).

``EffectGate.perform`` is the only way a task touches the outside world:

1. The effect id is derived from (run, task, attempt, ordinal, operation, input digest).
   A journaled outcome for that id is reused — confirmed results are never redone.
2. Policy denies first (``toolsDeny``/``toolsAllow``, ``providers``); then the approval mode
   decides whether a person must approve (pause, ask at the terminal, or deny:
   :mod:`~agentctl.engine.effects.approval_gate`).
3. An effect that needs no approval commits ``started`` as it is journaled (one commit,
   with its budget reservation and audit event), then the dispatch runs. One that needs
   approval commits ``requested`` and its approval; once approved, ``started`` commits,
   then the dispatch runs. ``requested`` is a durable state only where something waits
   between the journal and the dispatch.
4. Its outcome commits: ``succeeded`` + result + confirmed; ``failed`` for a definite
   failure; ``uncertain`` for a timeout, a lost connection or a cancellation after dispatch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentctl import hints
from agentctl.digest import canonical_json
from agentctl.engine.core.faults import Faults
from agentctl.engine.core.records import Attempt, RunLog
from agentctl.engine.effects import budget, journal
from agentctl.engine.effects.approval_gate import after_approval, gate_effect, gate_requested
from agentctl.engine.effects.approval_policy import deny_reason, needs_approval
from agentctl.engine.effects.journal import ConcludedEffectState
from agentctl.engine.effects.tracing import traced_dispatch, traced_effect
from agentctl.error_codes import ErrorCode
from agentctl.errors import AgentctlError, Cancelled, OwnershipLostError, PersistenceError
from agentctl.ids import Clock
from agentctl.signals import (
    EffectBlocked,
    FreshAttempt,
    OutcomeUnknown,
    TaskFailure,
    as_task_failure,
)
from agentctl.store import effects_repo
from agentctl.store.errors import retry_transient
from agentctl.store.ownership import OwnedRun
from agentctl.store.states import EffectState

__all__ = ["EffectGate", "InteractiveApprover"]


InteractiveApprover = Callable[[dict[str, Any]], Awaitable[bool]]


class EffectGate:
    def __init__(
        self,
        store: OwnedRun,
        log: RunLog,
        clock: Clock,
        *,
        policy: dict[str, Any],
        faults: Faults,
        approver: InteractiveApprover | None = None,
        approval_mode: str | None = None,
        on_task_running: Callable[[Any, Attempt], None] | None = None,
    ) -> None:
        self.store = store
        self.log = log
        self.clock = clock
        self.policy = policy
        self.faults = faults
        self.approver = approver
        self.approval_mode = approval_mode
        self._usage: dict[str, tuple[Any, Any]] = {}
        # Effects this gate journaled without a tool call (none to conclude with them).
        self._no_tool_call: set[str] = set()
        # Effects this gate journaled with no budget reservation: when one measures no
        # usage either, its outcome has nothing to settle (and takes no run lock for it).
        self._unreserved: set[str] = set()
        self._on_task_running = on_task_running

    def journaled(self, attempt: Attempt, spec: journal.EffectSpec) -> bool:
        """Whether this attempt already journaled ``spec`` as its next effect.

        Lets a body that would skip an effect when the world already looks done (a write
        whose content is in place) notice that the world looks done *because of its own
        earlier dispatch*, whose outcome must then be reused or reconciled, not ignored.
        """
        with self.store.read() as conn:
            found = journal.journaled_effect(
                conn, attempt.run_id, attempt.task_id, attempt.attempt, attempt.ordinal + 1, spec
            )
        # Anything journaled at that position may be what made the world look done.
        return found is not None

    def note_remote_task(self, attempt: Attempt, effect_id: str, handle: Mapping[str, Any]) -> None:
        """Journal, while ``effect_id`` is in flight, the handle its peer returned (an A2A
        task id): if this process dies before the outcome commits, the effect is uncertain
        and an operator can follow the remote work by that handle instead of redoing it."""
        now = self.clock.now()
        with self.store.write() as conn:
            journal.note_remote_task(
                conn, self.log, effect_id, handle, task_id=attempt.task_id, now=now
            )
        self.faults.hit("effect.remote_noted")

    @traced_effect
    async def perform(
        self,
        attempt: Attempt,
        spec: journal.EffectSpec,
        dispatch: Callable[[str], Awaitable[Any]],
        *,
        model: bool = False,
        tool_approval: str | None = None,
        prompt: str | None = None,
        reservation: Mapping[str, float] | None = None,
        usage: Callable[[Any], Mapping[str, float]] | None = None,
        failed_usage: Mapping[str, float] | None = None,
        tool_call: Mapping[str, Any] | None = None,
    ) -> Any:
        """Journal, gate and dispatch one effect; see the module docstring.

        ``reservation`` is the worst case reserved before dispatch, ``usage`` maps the result
        to actual usage, ``failed_usage`` is what a failed dispatch still consumed.
        """
        ordinal = attempt.next_ordinal()
        now = self.clock.now()
        denial = deny_reason(self.policy, spec.policy_label, model=model, operation=spec.operation)
        gated = needs_approval(
            self.policy,
            effect_class=spec.effect_class,
            risk=spec.risk,
            tool_approval=tool_approval,
            mode_override=self.approval_mode,
            operation=spec.operation,
        )
        # Nothing waits between the journal and the dispatch of an effect that needs no
        # approval: it is journaled ``started``, the one commit before its dispatch (a
        # ``requested`` row would only be seen by a kill in that instant, and cost a
        # commit of its own). A denied one is journaled ``requested`` and refused.
        start_now = denial is None and not gated
        # One transaction journals the effect unless its position holds one already (one
        # statement: the position used to be read before the transaction and again in
        # it); what it found there is read in the same transaction, which wrote nothing.
        denied: budget.BudgetDenied | None = None
        found: journal.Journaled | None = None
        with self.store.write() as conn:
            record = journal.journal_if_position_empty(
                conn,
                run_id=attempt.run_id,
                task_id=attempt.task_id,
                attempt=attempt.attempt,
                ordinal=ordinal,
                spec=spec,
                now=now,
                started=start_now,
            )
            if record is None:
                found = journal.journaled_effect(
                    conn, attempt.run_id, attempt.task_id, attempt.attempt, ordinal, spec
                )
                assert found is not None  # the insert saw an effect at the position
            else:
                attempt.effect_ids.append(record.id)
                if denial is None:
                    denied = self._requested(
                        conn, attempt, record, spec, now, reservation, tool_call
                    )
                else:
                    self._refuse(
                        conn,
                        attempt,
                        record.id,
                        status=EffectState.FAILED,
                        code=ErrorCode.POLICY_DENIED,
                        message=f"policy denied effect: {spec.operation} ({denial})",
                        event="effect.denied",
                        payload={"operation": spec.operation, "reason": denial},
                        now=now,
                    )
        if found is not None:
            existing = found.record
            attempt.effect_ids.append(existing.id)
            if not found.same_request:
                # One effect per position: a different request here is refused, after the
                # journaled one (if its outcome is unknown) has stopped the run as uncertain.
                if existing.status in (EffectState.STARTED, EffectState.UNCERTAIN):
                    self._reuse(existing)
                raise journal.nondeterministic(existing, spec)
            self._usage[existing.id] = (usage, failed_usage)
            reused = self._reuse(existing)
            if reused is not _PROCEED:
                return reused
            if existing.status == EffectState.WAITING_FOR_APPROVAL:
                return await after_approval(self, attempt, existing, spec, dispatch)
            # Journaled ``requested`` by an earlier process that stopped before asking for
            # its approval (or by a release that journaled every effect so): a gated one
            # is asked for now, never dispatched unapproved; the rest move to ``started``.
            if gated:
                return await gate_requested(self, attempt, existing, spec, dispatch, prompt)
            return await self._start_and_dispatch(attempt, existing, spec, dispatch)
        if denial is not None:
            message = f"policy denied effect: {spec.operation} ({denial})"
            raise TaskFailure(message, code=ErrorCode.POLICY_DENIED)
        if denied is not None:
            raise TaskFailure(denied.message(), code=ErrorCode.BUDGET_EXCEEDED, stops_run=True)
        assert record is not None
        self._usage[record.id] = (usage, failed_usage)
        # Both points are passed by every effect. An ungated one is ``started`` at the
        # first already: a kill there leaves what a kill at ``effect.started`` leaves (the
        # effect uncertain on resume, as any started effect; see durable-execution.md).
        self.faults.hit("effect.requested")
        if gated:
            return await gate_effect(self, attempt, record, spec, dispatch, prompt)
        self.faults.hit("effect.started")
        return await self._dispatch(attempt, record, spec, dispatch)

    def _requested(
        self,
        conn: Any,
        attempt: Attempt,
        record: journal.EffectRecord,
        spec: journal.EffectSpec,
        now: Any,
        reservation: Mapping[str, float] | None,
        tool_call: Mapping[str, Any] | None,
    ) -> budget.BudgetDenied | None:
        """What commits with an effect journaled (``requested``, or ``started`` when it
        needs no approval): the owner's task row, its tool call, its audit event
        (``effect.requested`` either way: the request is what it records) and its budget
        reservation (refused: concluded here, and the limit returned)."""
        if self._on_task_running is not None:
            self._on_task_running(conn, attempt)
        if tool_call is not None:
            journal.record_tool_call(
                conn, attempt.run_id, attempt.task_id, record.id, tool_call, now
            )
        else:
            # Journaled here without a tool call: its outcome has none to conclude.
            self._no_tool_call.add(record.id)
        self.log.event(
            conn,
            "effect.requested",
            {"operation": spec.operation, "effectClass": spec.effect_class, "risk": spec.risk},
            now=now,
            task_id=attempt.task_id,
            effect_id=record.id,
        )
        if reservation and self.log.lane is not None:  # a claimed task's (a worker's)
            reservation = budget.reserved_by_claimed_task(conn, attempt.run_id, reservation)
        if not reservation:
            self._unreserved.add(record.id)
            return None
        denied = budget.reserve(conn, attempt.run_id, record.id, reservation, now, new_effect=True)
        if denied is not None:
            self._refuse(
                conn,
                attempt,
                record.id,
                status=EffectState.FAILED,
                code=ErrorCode.BUDGET_EXCEEDED,
                message=denied.message(),
                event="budget.exceeded",
                payload={
                    "resource": denied.resource,
                    "limit": denied.limit,
                    "used": denied.used,
                    "reserved": denied.reserved,
                    "requested": denied.requested,
                },
                now=now,
                dispatched=False,
            )
        return denied

    def _refuse(
        self,
        conn: Any,
        attempt: Attempt,
        effect_id: str,
        *,
        status: ConcludedEffectState,
        code: ErrorCode,
        message: str,
        event: str,
        payload: dict[str, Any],
        now: Any,
        dispatched: bool = True,
    ) -> None:
        """Conclude an effect that will never be dispatched (denied, refused, rejected).
        ``dispatched=False``: refused in the transaction that journaled it ``started``
        (its budget), so its start time goes with that state."""
        journal.finish_effect(
            conn,
            effect_id,
            status=status,
            now=now,
            confirmed=True,
            error={"code": str(code), "message": message},
            dispatched=dispatched,
        )
        self.log.event(conn, event, payload, now=now, task_id=attempt.task_id, effect_id=effect_id)

    # -- reuse -------------------------------------------------------------------------

    def _reuse(self, record: journal.EffectRecord) -> Any:
        """The journaled outcome, or ``_PROCEED`` when the effect may still be dispatched."""
        if record.status == EffectState.SUCCEEDED and record.confirmed:
            return record.result
        if record.status == EffectState.FAILED:
            error = record.error or {}
            raise TaskFailure(
                str(error.get("message") or f"{record.operation} failed"),
                code=str(error.get("code") or ErrorCode.EFFECT_FAILED),
                retryable=bool(error.get("retryable")),
                details=error.get("details"),
            )
        if record.status == EffectState.CANCELLED:
            error = record.error or {}
            raise TaskFailure(
                str(error.get("message") or "approval rejected"),
                code=str(error.get("code") or ErrorCode.APPROVAL_REJECTED),
                stops_run=True,
            )
        if record.status in (EffectState.STARTED, EffectState.UNCERTAIN, EffectState.SUCCEEDED):
            with self.store.read() as conn:
                conclusion = journal.latest_reconciliation(conn, record.id)
            if conclusion is not None and conclusion.status == "applied":
                return conclusion.result
            if conclusion is not None:
                raise FreshAttempt(record.id)
            if record.status != EffectState.UNCERTAIN:
                now = self.clock.now()
                with self.store.write() as conn:
                    journal.set_status(conn, record.id, EffectState.UNCERTAIN, now)
                    self.log.event(
                        conn,
                        "effect.uncertain",
                        {
                            "operation": record.operation,
                            "reason": "started before a crash; outcome unknown",
                        },
                        now=now,
                        task_id=record.task_id,
                        effect_id=record.id,
                    )
            raise EffectBlocked(record.id, record.operation)
        return _PROCEED

    # -- dispatch ----------------------------------------------------------------------

    async def _start_and_dispatch(
        self,
        attempt: Attempt,
        record: journal.EffectRecord,
        spec: journal.EffectSpec,
        dispatch: Callable[[str], Awaitable[Any]],
    ) -> Any:
        now = self.clock.now()
        # One conditional update of the effect's row (and the owner's task row): a claimed
        # task's fence makes it with row locks, without queueing for the write lock.
        with self.store.row_write() as conn:
            journal.set_status(conn, record.id, EffectState.STARTED, now)
            if self._on_task_running is not None:
                self._on_task_running(conn, attempt)
        self.faults.hit("effect.started")
        return await self._dispatch(attempt, record, spec, dispatch)

    async def _dispatch(
        self,
        attempt: Attempt,
        record: journal.EffectRecord,
        spec: journal.EffectSpec,
        dispatch: Callable[[str], Awaitable[Any]],
    ) -> Any:
        """Dispatch an effect whose ``started`` row committed, and commit its outcome."""
        try:
            result = await traced_dispatch(spec, dispatch, record.id)
        except TaskFailure as failure:
            self._finish(attempt, record, EffectState.FAILED, error=failure.to_json())
            raise
        except AgentctlError as error:
            mapped = as_task_failure(error)
            self._finish(attempt, record, EffectState.FAILED, error=mapped.to_json())
            raise mapped from error
        except OutcomeUnknown as unknown:
            self._finish(
                attempt,
                record,
                EffectState.UNCERTAIN,
                error={
                    "code": ErrorCode.EFFECT_UNCERTAIN,
                    "message": unknown.message,
                    "details": unknown.details,
                },
                confirmed=False,
            )
            raise EffectBlocked(record.id, record.operation) from unknown
        except (asyncio.CancelledError, Cancelled):
            self._finish(
                attempt,
                record,
                EffectState.UNCERTAIN,
                error={
                    "code": ErrorCode.EFFECT_CANCELLED_IN_FLIGHT,
                    "message": "cancelled after dispatch; outcome unknown",
                },
                confirmed=False,
            )
            raise
        self.faults.hit("effect.dispatched")
        self._finish(attempt, record, EffectState.SUCCEEDED, result=result)
        self.faults.hit("effect.finished")
        return result

    def _finish(
        self,
        attempt: Attempt,
        record: journal.EffectRecord,
        status: ConcludedEffectState,
        *,
        result: Any = None,
        error: Any = None,
        confirmed: bool = True,
    ) -> None:
        now = self.clock.now()
        usage, failed_usage = self._usage.pop(record.id, (None, None))
        # An effect found in the journal (a resumed attempt) may carry one: concluded.
        tool_call = record.id not in self._no_tool_call
        self._no_tool_call.discard(record.id)
        # Journaled here without a reservation (not found in the journal: a resumed one
        # may hold one): settling no usage against no reservation changes nothing.
        unreserved = record.id in self._unreserved
        self._unreserved.discard(record.id)

        def record_outcome() -> list[budget.BudgetDenied]:
            overruns: list[budget.BudgetDenied] = []
            with self.store.write() as conn:
                journal.finish_effect(
                    conn,
                    record.id,
                    status=status,
                    now=now,
                    result=result,
                    error=error,
                    confirmed=confirmed,
                )
                # A tool call's terminal status commits with its effect's.
                if tool_call:
                    effects_repo.finish_tool_call(
                        conn,
                        record.id,
                        status=status,
                        result_json=None if result is None else canonical_json(result),
                        error_json=None if error is None else canonical_json(error),
                        now=now,
                    )
                ok = status == EffectState.SUCCEEDED
                if ok or status in (EffectState.FAILED, EffectState.CANCELLED):
                    measured = (usage(result) if usage else {}) if ok else failed_usage or {}
                    claimed = self.log.lane is not None  # a worker's: see budget.settle_outcome
                    settled = budget.settle_outcome(
                        conn, attempt.run_id, record.id, measured, now, not unreserved, claimed
                    )
                    overruns = settled if ok else []  # a failed dispatch's are not reported
                # An uncertain effect keeps its worst-case reservation: it may have consumed it.
                for overrun in overruns:
                    self.log.event(
                        conn,
                        "budget.overrun",
                        {
                            "resource": overrun.resource,
                            "limit": overrun.limit,
                            "used": overrun.used,
                        },
                        now=now,
                        task_id=attempt.task_id,
                        effect_id=record.id,
                    )
                self.log.event(
                    conn,
                    f"effect.{status}",
                    {"operation": record.operation, "error": error},
                    now=now,
                    task_id=attempt.task_id,
                    effect_id=record.id,
                )
            return overruns

        # The effect ran: its outcome must not be lost to a busy or full database. Retry
        # within the store's window; if it still cannot be written, stop without concluding
        # anything (the effect stays `started`, so resume marks it uncertain for an operator).
        try:
            overruns = retry_transient(record_outcome)
        except PersistenceError as exc:
            if isinstance(exc, OwnershipLostError):
                raise
            raise PersistenceError(
                f"the outcome of effect {record.id} ({record.operation}, {status}) could not be "
                f"recorded: {exc.message}",
                code=exc.code,
                hint="when the database is writable again, run "
                f"{hints.quoted(hints.resume(attempt.run_id))}; the effect will be uncertain: "
                "check whether it took effect and reconcile it",
                run_id=attempt.run_id,
            ) from exc
        if overruns:
            raise TaskFailure(
                overruns[0].overrun_message(),
                code=ErrorCode.BUDGET_EXCEEDED,
                stops_run=True,
            )


_PROCEED: Any = object()
