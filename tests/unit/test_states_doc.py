"""docs/states.md draws the transition tables of agentctl/store/states.py."""

from __future__ import annotations

import re
from pathlib import Path

from agentctl.store.states import (
    APPROVAL_MOVES,
    EFFECT_MOVES,
    FIRING_MOVES,
    RUN_MOVES,
    TASK_MOVES,
    allowed_priors,
    is_allowed,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "states.md"


def _section(title: str) -> dict[str, set[str]]:
    text = DOC.read_text()
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    previous: set[str] = set()
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if "|" in line else []
        if len(cells) != 2 or cells[0] in ("from", "---"):
            continue
        targets = (
            previous
            if cells[1] == "the same"
            else set()
            if cells[1] == "—"
            else set(re.findall(r"`(\w+)`", cells[1]))
        )
        previous = targets
        for state in re.findall(r"`(\w+)`", cells[0]):
            rows[state] = targets
    return rows


def _table(moves: object) -> dict[str, set[str]]:
    return {str(k): {str(s) for s in v} for k, v in moves.items()}  # type: ignore[attr-defined]


def test_the_page_matches_every_table() -> None:
    assert _section("Run") == _table(RUN_MOVES)
    assert _section("Task") == _table(TASK_MOVES)
    assert _section("Effect") == _table(EFFECT_MOVES)
    assert _section("Approval and question") == _table(APPROVAL_MOVES)
    assert _section("Schedule firing") == _table(FIRING_MOVES)


def test_priors_are_the_inverse_of_the_moves() -> None:
    assert set(allowed_priors("effect", "started")) == {"requested", "waiting_for_approval"}
    assert allowed_priors("run", "succeeded") == ("running",)
    assert not is_allowed("effect", "succeeded", "uncertain")
    assert is_allowed("task", "pending", "running")
