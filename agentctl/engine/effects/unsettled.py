"""Effects in doubt: started, outcome unknown, and no operator conclusion yet.

``inspect``, the next-step hints, the dashboard and shell completion all ask this one
question, so it has its own module below them (operations and next_steps both read it).
"""

from __future__ import annotations

from typing import Any

from agentctl.engine.core.records import TERMINAL_RUN_STATES, load_run
from agentctl.engine.effects import journal
from agentctl.store import effects_repo, runs_repo
from agentctl.store.engine import Store
from agentctl.store.ownership import owner_alive
from agentctl.store.records import unknown_run

__all__ = ["needs_reconciliation"]


def needs_reconciliation(store: Store, run_id: str | None = None) -> list[dict[str, Any]]:
    """Effects whose outcome is unknown and that have no conclusion yet."""
    with store.read() as conn:
        if run_id is not None:
            if runs_repo.cancel_flag(conn, run_id) is None:  # one narrow read, nothing decoded
                raise unknown_run(run_id)
        found = []
        live: dict[str, bool] = {}
        for effect_id in effects_repo.unsettled_effect_ids(conn, run_id):
            record = journal.require_effect(conn, effect_id)
            if record.run_id not in live:
                run = load_run(conn, record.run_id)
                live[record.run_id] = (
                    run.status not in TERMINAL_RUN_STATES
                    and run.owner_id is not None
                    and owner_alive(run.owner_id)
                )
            # An effect of a run a live process executes is in flight, not in doubt.
            if not live[record.run_id] and journal.latest_reconciliation(conn, effect_id) is None:
                found.append(record.to_json())
    return found
