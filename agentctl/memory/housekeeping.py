"""``agentctl gc``: remove expired long-term memory and old terminal runs.

A run is collected when its status is terminal (succeeded, failed, cancelled) and it was
last updated before the cutoff; its rows go with it (see
:mod:`agentctl.store.retention_repo`). Artifact blobs are left to ``agentctl artifacts
gc``, which knows which are still referenced.

Deletion happens in batches (``batch_size`` runs or entries per IMMEDIATE transaction,
500 by default) rather than in one transaction: a store with tens of thousands of old
runs would otherwise hold the write lock for seconds, and every running workflow's next
commit would wait behind it. A crash between batches leaves some old runs collected and
the rest for the next ``gc``; every batch is whole, so no run is ever half-deleted.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

from pydantic import Field
from pydantic.dataclasses import dataclass

from agentctl.errors import UsageError
from agentctl.memory.entries import ZuluTime
from agentctl.memory.longterm import GC_BATCH, delete_expired_entries
from agentctl.store import memory_repo, retention_repo
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

if TYPE_CHECKING:
    from agentctl.store.engine import Store

__all__ = ["GC_BATCH", "TERMINAL_RUN_STATUSES", "GcReport", "collect_garbage"]

#: Run statuses that can never change again (the engine's TERMINAL_RUN_STATES).
TERMINAL_RUN_STATUSES = ("cancelled", "failed", "succeeded")


@dataclass(frozen=True, slots=True, config=CAMEL)
class GcReport(CamelRecord):
    """What ``agentctl gc`` removed (or, with ``dry_run``, would remove)."""

    dry_run: bool
    cutoff: Annotated[ZuluTime, Field(alias="runsUpdatedBefore")]
    now: ZuluTime
    memory_entries: Annotated[int, Field(alias="expiredMemoryEntries")]
    runs: Annotated[int, Field(alias="terminalRuns")]
    run_ids: tuple[str, ...]

    _order = keys_in_order("dryRun", "now")


def collect_garbage(
    store: Store,
    now: datetime,
    *,
    older_than_days: int = 30,
    dry_run: bool = False,
    batch_size: int = GC_BATCH,
) -> GcReport:
    """Delete (or, with ``dry_run``, count) expired memory entries and old terminal runs,
    at most ``batch_size`` of either per transaction."""
    if isinstance(older_than_days, bool) or older_than_days < 0:
        raise UsageError(
            f"--older-than-days must be 0 or more (got {older_than_days})",
            hint="agentctl gc --older-than-days 30",
        )
    cutoff = now - timedelta(days=older_than_days)
    if dry_run:
        with store.read() as conn:
            memory_count = memory_repo.count_expired(conn, now)
            run_ids = retention_repo.old_terminal_runs(conn, TERMINAL_RUN_STATUSES, cutoff)
    else:
        memory_count = delete_expired_entries(store, now, batch_size=batch_size)
        run_ids = _delete_old_runs(store, cutoff, batch_size)
    return GcReport(
        dry_run=dry_run,
        cutoff=cutoff,
        now=now,
        memory_entries=memory_count,
        runs=len(run_ids),
        run_ids=tuple(run_ids),
    )


def _delete_old_runs(store: Store, cutoff: datetime, batch_size: int) -> list[str]:
    """Delete old terminal runs ``batch_size`` per transaction; the ids deleted, by id.

    Each batch is chosen inside its own write transaction, so a run that changed since an
    earlier batch is judged on its current row. Walking by id (``after``) ends the loop
    even if a batch somehow deleted nothing.
    """
    deleted: list[str] = []
    after: str | None = None
    while True:
        with store.write() as conn:
            batch = retention_repo.old_terminal_runs(
                conn, TERMINAL_RUN_STATUSES, cutoff, after=after, limit=batch_size
            )
            retention_repo.delete_runs(conn, batch)
        deleted.extend(batch)
        if len(batch) < batch_size:
            return deleted
        after = batch[-1]
