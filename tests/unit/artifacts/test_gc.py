"""gc by reachability: refs and live leases keep blobs; dry-run deletes nothing;
an interrupted collection is finished or undone when the store is opened again."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from agentctl.artifacts import ArtifactRef, ArtifactStore
from agentctl.ids import FixedClock
from agentctl.store.engine import Store


def _blob_files(artifacts: ArtifactStore) -> set[str]:
    return {digest for digest, _ in artifacts.layout.iter_blobs()}


def _delete_run(store: Store, run_id: str) -> None:
    with store.write() as conn:
        conn.exec_driver_sql("DELETE FROM runs WHERE id = ?", (run_id,))


def test_referenced_and_leased_blobs_survive(
    artifacts: ArtifactStore,
    recorded: Callable[..., ArtifactRef],
    write_file: Callable[[str, bytes], Path],
    clock: FixedClock,
) -> None:
    ref = recorded(b"referenced")
    leased = artifacts.ingest(write_file("leased", b"leased"), holder="t")
    report = artifacts.gc(older_than_days=0)
    assert report.removed_blobs == []
    assert (report.kept_referenced, report.kept_leased) == (1, 1)
    assert _blob_files(artifacts) == {ref.digest, leased.digest}
    clock.advance(3601)  # the lease expires; the ref never does
    report = artifacts.gc(older_than_days=0)
    assert report.removed_blobs == [leased.digest] and report.expired_leases == 1
    assert _blob_files(artifacts) == {ref.digest}


def test_deleting_a_run_makes_its_blobs_collectable_after_the_grace_period(
    artifacts: ArtifactStore,
    store: Store,
    recorded: Callable[..., ArtifactRef],
    add_run: Callable[[str], None],
    clock: FixedClock,
) -> None:
    add_run("run-2")
    shared = recorded(b"shared", name="a")
    recorded(b"shared", name="b", run_id="run-2")
    only_one = recorded(b"only run-1", name="c")
    _delete_run(store, "run-1")
    report = artifacts.gc()  # default grace: 30 days
    assert report.removed_blobs == [] and report.kept_recent == 1
    clock.advance(31 * 86400)
    report = artifacts.gc()
    assert report.removed_blobs == [only_one.digest]
    assert report.removed_bytes == len(b"only run-1")
    assert _blob_files(artifacts) == {shared.digest}
    with store.read() as conn:
        rows = [r[0] for r in conn.exec_driver_sql("SELECT digest FROM artifact_blobs")]
    assert rows == [shared.digest]


def test_dry_run_reports_without_deleting(
    artifacts: ArtifactStore, store: Store, recorded: Callable[..., ArtifactRef]
) -> None:
    ref = recorded(b"doomed")
    stray = artifacts.root / "tmp" / "lease-dead.part"
    stray.write_bytes(b"partial")
    _delete_run(store, "run-1")
    report = artifacts.gc(older_than_days=0, dry_run=True)
    assert report.dry_run and report.removed_blobs == [ref.digest]
    assert report.removed_temp_files == [str(stray)]
    assert _blob_files(artifacts) == {ref.digest} and stray.exists()
    report = artifacts.gc(older_than_days=0)
    assert report.removed_blobs == [ref.digest] and not stray.exists()
    assert _blob_files(artifacts) == set()


def test_dry_run_on_a_store_that_does_not_exist_creates_nothing(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    root = tmp_path / "nowhere" / "artifacts"
    report = ArtifactStore(root, store, clock).gc(dry_run=True)
    assert report.removed_blobs == [] and not root.exists()


def test_untracked_blobs_use_their_file_age(
    artifacts: ArtifactStore, write_file: Callable[[str, bytes], Path], clock: FixedClock
) -> None:
    blob = artifacts.ingest(write_file("x", b"never recorded"), holder="t")
    clock.advance(2 * 3600)
    path = artifacts.layout.blob_path(blob.digest)
    assert artifacts.gc(older_than_days=30).kept_recent == 1
    old = clock.now().timestamp() - 40 * 86400
    os.utime(path, (old, old))
    assert artifacts.gc(older_than_days=30).removed_blobs == [blob.digest]


def test_opening_the_store_finishes_or_undoes_an_interrupted_gc(
    store: Store,
    clock: FixedClock,
    artifacts: ArtifactStore,
    recorded: Callable[..., ArtifactRef],
    write_file: Callable[[str, bytes], Path],
) -> None:
    """State a crash between quarantine and delete leaves: the database decides."""
    kept = recorded(b"still referenced")
    doomed = artifacts.ingest(write_file("d", b"unreachable"), holder="t")
    with store.write() as conn:
        artifacts.release(conn, [doomed])
    quarantine = artifacts.root / "quarantine"
    for digest in (kept.digest, doomed.digest):
        os.replace(artifacts.layout.blob_path(digest), quarantine / digest.split(":")[1])
    reopened = ArtifactStore(artifacts.root, store, clock)
    assert _blob_files(reopened) == {kept.digest}
    assert list(quarantine.iterdir()) == []
    assert reopened.verify().problems == []
