"""The allowed state moves of runs, tasks, effects and approvals, in one place.

The model test observes states only between its steps, so one step may walk several moves
(``paused -> running -> succeeded`` inside one ``resume``). An observed change is allowed
when the new state is reachable from the old one through these moves.

The moves are agentctl/store/states.py's own tables; the checks in invariants.py read
only ``reachable``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from agentctl.store import states

__all__ = ["ALLOWED", "reachable"]


def _as_text(table: Mapping[Any, frozenset[Any]]) -> dict[str, frozenset[str]]:
    return {str(state): frozenset(str(s) for s in moves) for state, moves in table.items()}


# The product's own tables: the model checks what the store enforces.
ALLOWED: dict[str, dict[str, frozenset[str]]] = {
    "run": _as_text(states.RUN_MOVES),
    "task": _as_text(states.TASK_MOVES),
    "effect": _as_text(states.EFFECT_MOVES),
    "approval": _as_text(states.APPROVAL_MOVES),
}

#: States a record of a terminal run may not be in: nothing of a finished run stays live.
LIVE_TASK_STATES = frozenset({"running", "waiting_for_approval", "waiting_for_effect"})
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
