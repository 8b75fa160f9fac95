"""A run in one line: its state, how long it took, its tasks, effects, tokens and cost.

``roll``, ``resume`` and the recovery commands end with it, so a person sees at a glance
what a run did without ``inspect``. ``Runtime.recap`` reads it as a ``RunTotals``, whose
``text()`` is that line.
"""

from __future__ import annotations

from typing import Any

from agentctl.engine.core.records import load_run
from agentctl.engine.effects import budget, journal
from agentctl.store import tasks_repo
from agentctl.store.engine import Store

__all__ = ["run_summary"]

_DONE = ("succeeded", "failed", "skipped", "cancelled")


def run_summary(store: Store, run_id: str) -> dict[str, Any]:
    """``{state, durationSeconds, tasks: {done, total, failed}, effects, tokens?, costUsd?}``;
    tokens and cost only when a provider reported them."""
    with store.read() as conn:
        run = load_run(conn, run_id)
        counts = tasks_repo.state_counts(conn, run_id)
        effects = journal.list_effects(conn, run_id)
        used = {row["resource"]: row["used"] for row in budget.snapshot(conn, run_id)}
    summary: dict[str, Any] = {
        "state": run.status,
        "durationSeconds": round((run.updated_at - run.created_at).total_seconds(), 3),
        "tasks": {
            "done": sum(counts.get(state, 0) for state in _DONE),
            "total": sum(counts.values()),
            "failed": counts.get("failed", 0),
        },
        "effects": len(effects),
    }
    if used.get("totalTokens"):
        summary["tokens"] = int(used["totalTokens"])
    if used.get("costMicrousd"):
        summary["costUsd"] = used["costMicrousd"] / 1_000_000
    return summary
