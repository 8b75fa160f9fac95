"""Garbage collection by reachability, and recovery of an interrupted collection.

A blob is kept while any artifact ref points at it, while an unexpired ingestion lease
names it, or while it is younger than the grace period (``older_than_days``; its blob row's
``created_at``, or the file's mtime for a blob that never got a row). Everything else is
removed, with its row. Temporary files are removed once no live lease protects them.

Crash safety comes from ordering: under the store lock and inside one IMMEDIATE
transaction, gc deletes the doomed rows and *renames* the doomed files into
``quarantine/``; only after the commit does it delete them. A crash before the commit rolls
the rows back, so the next open (:func:`recover_quarantine`) sees the blobs still
reachable and renames them back; a crash after the commit leaves unreachable blobs in
quarantine, which recovery finishes deleting. The database decides, never a journal file.

Renaming inside the transaction matters: a task completion that finds its lease expired
falls back to checking that the blob file exists, and because that check runs in its own
IMMEDIATE transaction it observes either the file before gc or its absence after it.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from agentctl.artifacts.ingest import FaultPoint
from agentctl.artifacts.layout import DIGEST_PREFIX, Layout
from agentctl.artifacts.models import GcReport
from agentctl.store import artifacts_repo

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner, Store

__all__ = ["collect", "recover_quarantine"]

_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(slots=True)
class _Plan:
    doomed: list[tuple[str, Path | None, int]] = field(default_factory=list)
    doomed_rows: list[str] = field(default_factory=list)
    temp_files: list[Path] = field(default_factory=list)
    expired_leases: int = 0
    kept_referenced: int = 0
    kept_leased: int = 0
    kept_recent: int = 0


def _reachable(conn: SqlRunner, now: datetime) -> tuple[set[str], set[str], set[str]]:
    """``(referenced digests, leased digests, live lease ids)``."""
    referenced = artifacts_repo.referenced_digests(conn)
    live = artifacts_repo.live_leases(conn, now)
    leased = {lease.digest for lease in live if lease.digest}
    return referenced, leased, {lease.id for lease in live}


def _blob_rows(conn: SqlRunner) -> dict[str, tuple[datetime, int]]:
    return {row.digest: (row.created_at, row.size) for row in artifacts_repo.all_blobs(conn)}


def _plan(conn: SqlRunner, layout: Layout, now: datetime, cutoff: datetime) -> _Plan:
    plan = _Plan()
    referenced, leased, live_ids = _reachable(conn, now)
    rows = _blob_rows(conn)
    files = dict(layout.iter_blobs())
    for digest in sorted(files.keys() | rows.keys()):
        if digest in referenced:
            plan.kept_referenced += 1
            continue
        if digest in leased:
            plan.kept_leased += 1
            continue
        path = files.get(digest)
        if digest in rows:
            born, size = rows[digest]
        else:
            assert path is not None
            info = path.stat()
            born, size = datetime.fromtimestamp(info.st_mtime, UTC), info.st_size
        if born > cutoff:
            plan.kept_recent += 1
            continue
        plan.doomed.append((digest, path, size))
        if digest in rows:
            plan.doomed_rows.append(digest)
    if layout.tmp.is_dir():
        with os.scandir(layout.tmp) as scan:
            temp_entries = list(scan)
        for entry in temp_entries:
            if entry.is_dir(follow_symlinks=False):
                continue
            lease_id = entry.name.removesuffix(".part")
            if lease_id == entry.name or lease_id not in live_ids:
                plan.temp_files.append(Path(entry.path))
    plan.expired_leases = artifacts_repo.count_expired_leases(conn, now)
    return plan


def _report(plan: _Plan, dry_run: bool, older_than_days: float) -> GcReport:
    return GcReport(
        dry_run=dry_run,
        older_than_days=older_than_days,
        removed_blobs=[digest for digest, _, _ in plan.doomed],
        removed_bytes=sum(size for _, _, size in plan.doomed),
        removed_temp_files=[str(p) for p in plan.temp_files],
        expired_leases=plan.expired_leases,
        kept_referenced=plan.kept_referenced,
        kept_leased=plan.kept_leased,
        kept_recent=plan.kept_recent,
    )


def recover_quarantine(
    layout: Layout, store: Store, now: datetime, *, dry_run: bool = False
) -> tuple[list[str], list[str]]:
    """Finish or undo a collection a crash interrupted: ``(restored, purged)`` digests.

    The caller holds the store lock. A quarantined blob that is still reachable (a ref, a
    blob row, or a live lease names it) goes back to ``blobs/``; any other is deleted.
    """
    if not layout.quarantine.is_dir():
        return [], []
    with os.scandir(layout.quarantine) as scan:
        entries = [e for e in scan if _HEX.fullmatch(e.name)]
    if not entries:
        return [], []
    with store.read() as conn:
        referenced, leased, _ = _reachable(conn, now)
        tracked = set(_blob_rows(conn))
    restored: list[str] = []
    purged: list[str] = []
    for entry in entries:
        digest = DIGEST_PREFIX + entry.name
        keep = digest in referenced or digest in leased or digest in tracked
        (restored if keep else purged).append(digest)
        if dry_run:
            continue
        blob = layout.blob_path(digest)
        if keep and not blob.exists():
            blob.parent.mkdir(mode=0o700, exist_ok=True)
            os.replace(entry.path, blob)
        else:
            os.unlink(entry.path)
    return restored, purged


def collect(
    layout: Layout,
    store: Store,
    now: datetime,
    *,
    older_than_days: float,
    dry_run: bool,
    faults: FaultPoint | None = None,
) -> GcReport:
    """One collection: recover, decide and quarantine in one transaction, then delete."""
    cutoff = now - timedelta(days=older_than_days)
    # A dry run only reads: it neither waits for the lock nor creates the store's folders.
    with contextlib.nullcontext() if dry_run else layout.locked():
        restored, purged = recover_quarantine(layout, store, now, dry_run=dry_run)
        if dry_run:
            with store.read() as conn:
                plan = _plan(conn, layout, now, cutoff)
        else:
            layout.ensure()
            with store.write() as conn:
                plan = _plan(conn, layout, now, cutoff)
                for digest in plan.doomed_rows:
                    artifacts_repo.delete_unreferenced_blob(conn, digest)
                artifacts_repo.delete_expired_leases(conn, now)
                for digest, path, _ in plan.doomed:
                    if path is not None:
                        os.replace(path, layout.quarantine_path(digest))
                if faults is not None and plan.doomed:
                    faults.hit("artifact.gc.quarantined")
            for digest, path, _ in plan.doomed:
                if path is not None:
                    os.unlink(layout.quarantine_path(digest))
            for temp in plan.temp_files:
                temp.unlink(missing_ok=True)
    report = _report(plan, dry_run, older_than_days)
    report.restored_from_quarantine = restored
    report.purged_from_quarantine = purged
    return report
