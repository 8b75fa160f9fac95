"""The allowed state moves of runs, tasks, effects and approvals, in one place.

The model test observes states only between its steps, so one step may walk several moves
(``paused -> running -> succeeded`` inside one ``resume``). An observed change is allowed
when the new state is reachable from the old one through these moves.

When agentctl/store/states.py lands with its own transition table, replace the four
dictionaries below by imports of that table; the checks in invariants.py read only
``reachable``.
"""

from __future__ import annotations

from functools import cache

__all__ = ["ALLOWED", "reachable"]

RUN_MOVES: dict[str, frozenset[str]] = {
    "running": frozenset({"paused", "succeeded", "failed", "cancelled"}),
    "paused": frozenset({"running", "failed", "cancelled"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}

TASK_MOVES: dict[str, frozenset[str]] = {
    "pending": frozenset({"ready", "running", "skipped", "cancelled", "failed"}),
    "ready": frozenset({"running", "skipped", "cancelled"}),
    "running": frozenset(
        {
            "waiting_for_approval",
            "waiting_for_effect",
            "retry_scheduled",
            "succeeded",
            "failed",
            "cancelled",
            # A parked task goes back to `pending` so resume can pick it up again.
            "pending",
        }
    ),
    "waiting_for_approval": frozenset({"running", "pending", "failed", "cancelled"}),
    "waiting_for_effect": frozenset({"running", "pending", "failed", "cancelled"}),
    "retry_scheduled": frozenset({"running", "failed", "cancelled"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "skipped": frozenset(),
    "cancelled": frozenset(),
}

EFFECT_MOVES: dict[str, frozenset[str]] = {
    "requested": frozenset({"waiting_for_approval", "started", "cancelled", "failed"}),
    "waiting_for_approval": frozenset({"started", "cancelled", "failed"}),
    "started": frozenset({"succeeded", "failed", "uncertain", "cancelled"}),
    "uncertain": frozenset(),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}

APPROVAL_MOVES: dict[str, frozenset[str]] = {
    "pending": frozenset({"approved", "rejected", "answered", "expired"}),
    "approved": frozenset(),
    "rejected": frozenset(),
    "answered": frozenset(),
    "expired": frozenset(),
}

ALLOWED: dict[str, dict[str, frozenset[str]]] = {
    "run": RUN_MOVES,
    "task": TASK_MOVES,
    "effect": EFFECT_MOVES,
    "approval": APPROVAL_MOVES,
}

#: States a record of a terminal run may not be in: nothing of a finished run stays live.
LIVE_TASK_STATES = frozenset(
    {"ready", "running", "waiting_for_approval", "waiting_for_effect", "retry_scheduled"}
)
TERMINAL_RUN_STATES = frozenset({"succeeded", "failed", "cancelled"})


@cache
def reachable(kind: str, old: str, new: str) -> bool:
    """Whether ``new`` can follow ``old`` for a record of ``kind`` in zero or more moves."""
    moves = ALLOWED[kind]
    if old not in moves or new not in moves:
        return False
    seen, frontier = {old}, [old]
    while frontier:
        for nxt in moves[frontier.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return new in seen
