"""``effects continue-remote``: pick up an A2A delegation whose owner died mid-flight
(docs/protocols.md, "Continuing a delegation").

The gate journals the peer's task id the moment the peer returns it, before the first poll
(:func:`agentctl.engine.effects.journal.note_remote_task`). When the process that sent the
message dies while the peer works, the effect is ``started`` (then ``uncertain``) and the
run refuses to go on: sending the message again could make the peer do the work twice.
This operation asks the peer about that task instead (``GetTask``, ``tasks/get`` at 0.3;
never a second ``SendMessage``) and, once the task has stopped in a returning state,
appends the one conclusion an operator could have written by hand: ``applied`` with the
task object as the effect's result. ``resume`` then reuses it like any confirmed result.

A task that ended failed, or is still working when the time is up, concludes nothing: the
first is the operator's decision (reconcile ``not-applied`` to send it again), the second
is simply asked again later.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentctl import hints
from agentctl.engine.core.preflight import host_allowed
from agentctl.engine.core.records import TERMINAL_RUN_STATES, RunLog, RunRow, load_run
from agentctl.engine.effects import journal
from agentctl.engine.next_steps import after_conclusion
from agentctl.error_codes import ErrorCode
from agentctl.errors import (
    BlockedError,
    PolicyDeniedError,
    ProviderError,
    RunFailedError,
    UsageError,
)
from agentctl.ids import Clock
from agentctl.signals import OutcomeUnknown, TaskFailure
from agentctl.store.engine import Store
from agentctl.store.ownership import owner_alive
from agentctl.store.states import EffectState

__all__ = ["ContinueRemoteRequest", "continue_remote"]

#: How long to follow the remote task when neither the caller nor the peer entry says.
DEFAULT_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class ContinueRemoteRequest:
    effect_id: str
    reason: str
    actor: str = "cli-user"
    timeout_seconds: float | None = None
    #: The host environment header secrets may resolve from (``policy.environmentAllowlist``
    #: still filters it); the process environment when None.
    environ: Mapping[str, str] | None = None


def continue_remote(
    store: Store, request: ContinueRemoteRequest, *, clock: Clock
) -> dict[str, Any]:
    """Follow the effect's remote task; conclude ``applied`` with its result when it has."""
    if not request.reason.strip():
        raise UsageError("--reason must say why (it is kept in the audit log)")
    if request.timeout_seconds is not None and request.timeout_seconds <= 0:
        raise UsageError(f"--timeout-seconds must be positive, got {request.timeout_seconds:g}")
    with store.read() as conn:
        effect = journal.require_effect(conn, request.effect_id)
        run = load_run(conn, effect.run_id)
        handle = journal.remote_task(conn, effect)
        concluded = journal.latest_reconciliation(conn, effect.id)
    _check_continuable(effect, run, concluded, handle)
    assert handle is not None  # _check_continuable refused the effect otherwise
    peer_name = str(handle.get("peer") or (effect.request or {}).get("peer") or "")
    peer = _peer(run, peer_name, effect.id)
    task_id = str(handle["taskId"])
    timeout = float(
        request.timeout_seconds or peer.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS
    )
    task = _observe(peer, peer_name, task_id, run, request.environ, timeout)

    from agentctl.tools.a2a import FAILED_STATES, RETURNING_STATES, normalize_state, task_state

    state = normalize_state(task_state(task))
    observed = {"peer": peer_name, "taskId": task_id, "state": state, "actor": request.actor}
    if state in RETURNING_STATES:
        now = clock.now()
        with store.write() as conn:
            current = journal.require_effect(conn, effect.id)
            _check_continuable(current, run, journal.latest_reconciliation(conn, effect.id), handle)
            conclusion = journal.add_reconciliation(
                conn,
                effect.id,
                status="applied",
                reason=request.reason,
                actor=request.actor,
                now=now,
                evidence=f"A2A peer `{peer_name}` reported task {task_id} {state}",
                result=task,
            )
            log = RunLog.open(conn, effect.run_id)
            log.event(
                conn,
                "effect.remote_continued",
                {**observed, "reason": request.reason},
                now=now,
                task_id=effect.task_id,
                effect_id=effect.id,
            )
            log.event(
                conn,
                "effect.reconciled",
                {
                    "status": "applied",
                    "actor": request.actor,
                    "reason": request.reason,
                    "resultValidated": False,
                },
                now=now,
                task_id=effect.task_id,
                effect_id=effect.id,
            )
        return {
            "status": conclusion.status,
            "effect": current.to_json(),
            "remoteTask": {"peer": peer_name, "taskId": task_id, "state": state},
            "reconciliation": conclusion.to_json(),
            "next": [step.to_json() for step in after_conclusion(store, effect.run_id)],
        }
    if state in FAILED_STATES:
        now = clock.now()
        with store.write() as conn:
            RunLog.open(conn, effect.run_id).event(
                conn,
                "effect.remote_observed",
                observed,
                now=now,
                task_id=effect.task_id,
                effect_id=effect.id,
            )
        raise RunFailedError(
            f"A2A peer `{peer_name}` reports task {task_id} of effect {effect.id} `{state}`: "
            "the delegation did not succeed; nothing was recorded",
            code=ErrorCode.A2A_TASK_FAILED,
            hint="to send the message again, reconcile the effect as not-applied ("
            + hints.quoted(hints.reconcile(effect.id))
            + ") and resume the run; or cancel the run",
            run_id=effect.run_id,
        )
    raise BlockedError(
        f"A2A peer `{peer_name}` still reports task {task_id} of effect {effect.id} "
        f"`{state}` after {timeout:g} s; nothing was recorded",
        code=ErrorCode.A2A_TASK_RUNNING,
        hint="run the same command again later, or with a larger --timeout-seconds",
        run_id=effect.run_id,
    )


def _check_continuable(
    effect: journal.EffectRecord,
    run: RunRow,
    concluded: journal.Reconciliation | None,
    handle: Mapping[str, Any] | None,
) -> None:
    if effect.operation != "a2a.delegate":
        raise UsageError(
            f"effect {effect.id} is a {effect.operation}; only an A2A delegation "
            "(a2a.delegate) has a remote task to continue",
            code=ErrorCode.EFFECT_NOT_REMOTE,
            hint="conclude it with " + hints.quoted(hints.reconcile(effect.id)),
        )
    if run.status not in TERMINAL_RUN_STATES and run.owner_id and owner_alive(run.owner_id):
        raise BlockedError(
            f"effect {effect.id} belongs to run {run.id}, which a live process "
            f"({run.owner_id}) is executing; it follows the remote task itself",
            code=ErrorCode.EFFECT_IN_FLIGHT,
            hint="wait for the run to stop, or stop it with " + hints.quoted(hints.cancel(run.id)),
            run_id=run.id,
        )
    if concluded is not None:
        raise UsageError(
            f"effect {effect.id} was already reconciled `{concluded.status}` by "
            f"{concluded.actor}; there is nothing left to continue",
            code=ErrorCode.EFFECT_NOT_IN_FLIGHT,
            hint=f"resume the run with {hints.quoted(hints.resume(effect.run_id))}",
        )
    if effect.status not in (EffectState.STARTED, EffectState.UNCERTAIN):
        raise UsageError(
            f"effect {effect.id} is {effect.status}; only a started or uncertain "
            "delegation can be continued",
            code=ErrorCode.EFFECT_NOT_IN_FLIGHT,
            hint="see it with " + hints.quoted(f"agentctl effects inspect {effect.id}"),
        )
    if handle is None or not handle.get("taskId"):
        raise BlockedError(
            f"effect {effect.id} has no journaled A2A task: the peer never answered with a "
            "task (or the answer was lost), so there is nothing to follow",
            code=ErrorCode.EFFECT_NO_REMOTE_TASK,
            hint="check the peer, then conclude the effect with "
            + hints.quoted(hints.reconcile(effect.id)),
            run_id=effect.run_id,
        )


def _peer(run: RunRow, name: str, effect_id: str) -> dict[str, Any]:
    peers = (run.workflow.get("spec") or {}).get("a2aPeers") or {}
    peer = peers.get(name)
    if not isinstance(peer, Mapping):
        raise UsageError(
            f"effect {effect_id} delegated to A2A peer `{name}`, which run {run.id}'s "
            "workflow does not declare",
            code=ErrorCode.EFFECT_NOT_REMOTE,
            hint="conclude the effect with " + hints.quoted(hints.reconcile(effect_id)),
        )
    return dict(peer)


def _observe(
    peer: Mapping[str, Any],
    peer_name: str,
    task_id: str,
    run: RunRow,
    environ: Mapping[str, str] | None,
    timeout: float,
) -> dict[str, Any]:
    from urllib.parse import urlsplit

    from agentctl.tools.a2a import a2a_observe

    policy = (run.workflow.get("spec") or {}).get("policy") or {}
    host = urlsplit(str(peer.get("cardUrl") or "")).hostname or ""
    if not host_allowed(host, list(policy.get("networkAllowlist") or [])):
        raise PolicyDeniedError(
            f"policy denied effect: A2A peer `{peer_name}` at {host} is not in "
            "spec.policy.networkAllowlist",
            code=ErrorCode.POLICY_NETWORK_DENIED,
            hint="the run's workflow must allow the peer's host",
        )
    allow = set(policy.get("environmentAllowlist") or [])
    source = os.environ if environ is None else environ
    allowed = {k: v for k, v in source.items() if k in allow}
    try:
        return asyncio.run(a2a_observe(peer, task_id, environ=allowed, timeout_seconds=timeout))
    except (TaskFailure, OutcomeUnknown) as exc:
        raise ProviderError(
            f"cannot ask A2A peer `{peer_name}` about task {task_id}: {exc.message}",
            code=ErrorCode.A2A_OBSERVE_FAILED,
            hint="check that the peer is up and still knows the task, then run the command again",
        ) from exc
