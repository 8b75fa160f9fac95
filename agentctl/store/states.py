"""The states of runs, tasks, effects, approvals and schedule firings, and their moves.

This module is the one place that says which state changes are legal; docs/states.md
draws the same tables for people. Every state change the store writes is a conditional
UPDATE whose WHERE clause lists the prior states :func:`allowed_priors` returns for the new
state, so a writer that read a stale state (a second process got there first) changes no
row and gets :class:`~agentctl.errors.StateConflictError` instead of overwriting.

A move to the same state is listed where it happens in practice (a task re-marked
``running`` for a new attempt; a paused run parked again). Terminal states have no moves
out, except the effect ``failed``/``cancelled`` which no operator can reopen either.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

__all__ = [
    "APPROVAL_MOVES",
    "EFFECT_MOVES",
    "FIRING_MOVES",
    "RUN_MOVES",
    "TASK_MOVES",
    "ApprovalState",
    "EffectState",
    "FiringState",
    "RunState",
    "TaskState",
    "allowed_priors",
    "check_run_transition",
    "is_allowed",
]


class RunState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TaskState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    WAITING_FOR_EFFECT = "waiting_for_effect"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class EffectState(StrEnum):
    REQUESTED = "requested"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNCERTAIN = "uncertain"


class ApprovalState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    ANSWERED = "answered"
    EXPIRED = "expired"


class FiringState(StrEnum):
    RECORDED = "recorded"
    STARTED = "started"
    SKIPPED = "skipped"
    FAILED = "failed"


_R, _T, _E, _A = RunState, TaskState, EffectState, ApprovalState

#: Run: ``running`` while an owner executes it; ``paused`` while it waits for a person or
#: an operator's reconciliation (no owner); the three terminal states never change.
RUN_MOVES: Mapping[RunState, frozenset[RunState]] = {
    _R.RUNNING: frozenset({_R.RUNNING, _R.PAUSED, _R.SUCCEEDED, _R.FAILED, _R.CANCELLED}),
    _R.PAUSED: frozenset({_R.PAUSED, _R.RUNNING, _R.FAILED, _R.CANCELLED}),
    _R.SUCCEEDED: frozenset(),
    _R.FAILED: frozenset(),
    _R.CANCELLED: frozenset(),
}

_TASK_LIVE = frozenset(
    {_T.RUNNING, _T.WAITING_FOR_APPROVAL, _T.WAITING_FOR_EFFECT, _T.SUCCEEDED, _T.FAILED}
    | {_T.SKIPPED, _T.CANCELLED}
)

#: Task: a waiting task runs again when its run resumes; terminal tasks never change (a
#: retry or repair run gets rows of its own).
TASK_MOVES: Mapping[TaskState, frozenset[TaskState]] = {
    _T.PENDING: _TASK_LIVE,
    _T.RUNNING: _TASK_LIVE,
    _T.WAITING_FOR_APPROVAL: _TASK_LIVE,
    _T.WAITING_FOR_EFFECT: _TASK_LIVE,
    _T.SUCCEEDED: frozenset(),
    _T.FAILED: frozenset(),
    _T.SKIPPED: frozenset(),
    _T.CANCELLED: frozenset(),
}

#: Effect: the journal protocol. ``uncertain`` is left only by an operator's reconciliation,
#: which appends a record and never rewrites the effect row.
EFFECT_MOVES: Mapping[EffectState, frozenset[EffectState]] = {
    _E.REQUESTED: frozenset(
        {_E.WAITING_FOR_APPROVAL, _E.STARTED, _E.FAILED, _E.CANCELLED, _E.UNCERTAIN}
    ),
    _E.WAITING_FOR_APPROVAL: frozenset({_E.STARTED, _E.FAILED, _E.CANCELLED}),
    _E.STARTED: frozenset({_E.SUCCEEDED, _E.FAILED, _E.CANCELLED, _E.UNCERTAIN}),
    _E.SUCCEEDED: frozenset(),
    _E.FAILED: frozenset(),
    _E.CANCELLED: frozenset(),
    _E.UNCERTAIN: frozenset(),
}

#: Approval or question: decided once; ``expired`` when its run ends without a decision.
APPROVAL_MOVES: Mapping[ApprovalState, frozenset[ApprovalState]] = {
    _A.PENDING: frozenset({_A.APPROVED, _A.REJECTED, _A.ANSWERED, _A.EXPIRED}),
    _A.APPROVED: frozenset(),
    _A.REJECTED: frozenset(),
    _A.ANSWERED: frozenset(),
    _A.EXPIRED: frozenset(),
}

#: Schedule firing: ``recorded`` (committed before its run exists) becomes ``started`` in the
#: transaction that creates the run, or ``failed`` when the workflow no longer compiles.
#: ``skipped`` (an overlap) is written as such and never changes.
FIRING_MOVES: Mapping[FiringState, frozenset[FiringState]] = {
    FiringState.RECORDED: frozenset({FiringState.STARTED, FiringState.FAILED}),
    FiringState.STARTED: frozenset(),
    FiringState.SKIPPED: frozenset(),
    FiringState.FAILED: frozenset(),
}

_TABLES: Mapping[str, Mapping[Any, frozenset[Any]]] = {
    "firing": FIRING_MOVES,
    "run": RUN_MOVES,
    "task": TASK_MOVES,
    "effect": EFFECT_MOVES,
    "approval": APPROVAL_MOVES,
}


def _priors(table: Mapping[Any, frozenset[Any]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for prior, nexts in table.items():
        for state in nexts:
            out.setdefault(str(state), []).append(str(prior))
    return {state: tuple(sorted(priors)) for state, priors in out.items()}


_PRIORS = {kind: _priors(table) for kind, table in _TABLES.items()}


def allowed_priors(kind: str, new_state: str) -> tuple[str, ...]:
    """The states a ``kind`` record may be in when it moves to ``new_state``."""
    return _PRIORS[kind].get(str(new_state), ())


def is_allowed(kind: str, prior: str, new_state: str) -> bool:
    nexts = {str(prior_state): moves for prior_state, moves in _TABLES[kind].items()}
    return str(new_state) in {str(state) for state in nexts.get(str(prior), frozenset())}


def check_run_transition(run_id: str, prior: str, new_state: str) -> None:
    """Refuse a run move the table does not allow (exit 5, naming the run)."""
    if not is_allowed("run", prior, new_state):
        from agentctl.errors import StateConflictError

        raise StateConflictError(
            f"run {run_id} is {prior}; it cannot become {new_state}",
            run_id=run_id,
            hint=f"inspect it with `agentctl inspect {run_id}`",
        )
