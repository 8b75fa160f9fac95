"""``agentctl gc``: remove expired long-term memory and old terminal runs.

A run is collected when its status is terminal (succeeded, failed, cancelled) and it was
last updated before the cutoff. Deleting the run row removes its tasks, effects,
approvals, checkpoints, audit events, tool calls, budgets and artifact refs through
``ON DELETE CASCADE`` (foreign keys are on in every store connection); runs derived from
it keep their rows and lose only the link (``SET NULL``). Artifact blobs are left to
``agentctl artifacts gc``, which knows which are still referenced. Everything happens in
one IMMEDIATE transaction, so a crash collects all or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select

from agentctl.errors import UsageError
from agentctl.store.timestamps import to_iso
from agentctl.store.engine import Store
from agentctl.store.tables import memory_entries, runs

__all__ = ["TERMINAL_RUN_STATUSES", "GcReport", "collect_garbage"]

#: Run statuses that can never change again (the engine's TERMINAL_RUN_STATES).
TERMINAL_RUN_STATUSES = ("cancelled", "failed", "succeeded")


@dataclass(frozen=True, slots=True)
class GcReport:
    dry_run: bool
    cutoff: datetime
    now: datetime
    memory_entries: int
    runs: int
    run_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "now": to_iso(self.now),
            "runsUpdatedBefore": to_iso(self.cutoff),
            "expiredMemoryEntries": self.memory_entries,
            "terminalRuns": self.runs,
            "runIds": list(self.run_ids),
        }


def collect_garbage(
    store: Store, now: datetime, *, older_than_days: int = 30, dry_run: bool = False
) -> GcReport:
    """Delete (or, with ``dry_run``, count) expired memory entries and old terminal runs."""
    if isinstance(older_than_days, bool) or older_than_days < 0:
        raise UsageError(
            f"--older-than-days must be 0 or more (got {older_than_days})",
            hint="agentctl gc --older-than-days 30",
        )
    cutoff = now - timedelta(days=older_than_days)
    old_runs = (runs.c.status.in_(TERMINAL_RUN_STATUSES)) & (runs.c.updated_at < cutoff)
    expired = memory_entries.c.expires_at <= now
    with store.write() as conn:
        run_ids = tuple(
            str(row[0])
            for row in conn.execute(select(runs.c.id).where(old_runs).order_by(runs.c.id))
        )
        memory_count = int(
            conn.execute(
                select(func.count()).select_from(memory_entries).where(expired)
            ).scalar_one()
        )
        if not dry_run:
            conn.execute(delete(memory_entries).where(expired))
            if run_ids:
                conn.execute(delete(runs).where(runs.c.id.in_(run_ids)))
    return GcReport(
        dry_run=dry_run,
        cutoff=cutoff,
        now=now,
        memory_entries=memory_count,
        runs=len(run_ids),
        run_ids=run_ids,
    )
