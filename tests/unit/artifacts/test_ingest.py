"""Ingestion, leases and named versions against a real SQLite file and real blobs."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from agentctl.artifacts import ArtifactRef, ArtifactStore
from agentctl.digest import digest_bytes
from agentctl.errors import TaskError
from agentctl.ids import FixedClock
from agentctl.store.engine import Store

WriteFile = Callable[[str, bytes], Path]


def _lease_rows(store: Store) -> list[tuple[str, str | None]]:
    with store.read() as conn:
        return [
            (str(r[0]), r[1])
            for r in conn.exec_driver_sql("SELECT id, blob_digest FROM artifact_leases")
        ]


def test_ingest_publishes_an_immutable_blob_named_by_its_digest(
    artifacts: ArtifactStore, store: Store, write_file: WriteFile
) -> None:
    data = b"hello artifacts\n" * 1000
    blob = artifacts.ingest(write_file("a.txt", data), holder="task-a")
    hex_ = digest_bytes(data).removeprefix("sha256:")
    path = artifacts.root / "blobs" / hex_[:2] / hex_[2:]
    assert blob.digest == digest_bytes(data) and blob.size == len(data)
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o400
    assert list((artifacts.root / "tmp").iterdir()) == []
    # The lease is durable and already names the digest before any ref exists.
    assert _lease_rows(store) == [(blob.lease_id, blob.digest)]


def test_record_ref_commits_with_the_callers_transaction_and_releases_the_lease(
    artifacts: ArtifactStore, store: Store, write_file: WriteFile
) -> None:
    blob = artifacts.ingest(write_file("a.txt", b"v1"), holder="t")
    with pytest.raises(RuntimeError), store.write() as conn:
        artifacts.record_ref(conn, blob, run_id="run-1", task_id="t", name="out")
        raise RuntimeError("the task completion failed")
    # Rolled back with the task: no ref, no blob row, the lease still protects the bytes.
    assert artifacts.refs() == []
    assert _lease_rows(store) == [(blob.lease_id, blob.digest)]
    with store.write() as conn:
        ref = artifacts.record_ref(
            conn,
            blob,
            run_id="run-1",
            task_id="t",
            name="out",
            path="a.txt",
            definition_fingerprint="sha256:def",
            input_digest="sha256:in",
            output_digest="sha256:out",
        )
    assert (ref.name, ref.version, ref.digest, ref.size) == ("out", 1, blob.digest, 2)
    assert (ref.definition_fingerprint, ref.input_digest, ref.output_digest) == (
        "sha256:def",
        "sha256:in",
        "sha256:out",
    )
    assert _lease_rows(store) == []
    assert artifacts.inspect(blob.digest).media_type == "text/plain"


def test_names_keep_versions_across_runs(
    recorded: Callable[..., ArtifactRef],
    artifacts: ArtifactStore,
    add_run: Callable[[str], None],
) -> None:
    add_run("run-2")
    first = recorded(b"draft 1", name="summary.md")
    second = recorded(b"draft 2", name="summary.md", run_id="run-2")
    recorded(b"other", name="notes.txt")
    assert [(r.version, r.digest) for r in artifacts.versions("summary.md")] == [
        (1, first.digest),
        (2, second.digest),
    ]
    latest = artifacts.latest("summary.md")
    assert latest is not None and latest.version == 2 and latest.run_id == "run-2"
    assert artifacts.latest("never-written") is None
    assert [r.name for r in artifacts.refs(run_id="run-1")] == ["notes.txt", "summary.md"]
    assert [r.version for r in artifacts.refs(run_id="run-2", task_id="write")] == [2]


def test_same_bytes_are_stored_once(
    artifacts: ArtifactStore, write_file: WriteFile, recorded: Callable[..., ArtifactRef]
) -> None:
    a = recorded(b"same", name="a")
    b = recorded(b"same", name="b")
    assert a.digest == b.digest
    assert len([p for p in (artifacts.root / "blobs").rglob("*") if p.is_file()]) == 1


def test_ingest_many_uses_one_lease_per_file(
    artifacts: ArtifactStore, store: Store, write_file: WriteFile
) -> None:
    paths = [write_file(f"f{i}.bin", bytes([i]) * 100) for i in range(5)]
    blobs = artifacts.ingest_many(paths, holder="t")
    assert [b.digest for b in blobs] == [digest_bytes(bytes([i]) * 100) for i in range(5)]
    assert len({b.lease_id for b in blobs}) == 5
    assert sorted(_lease_rows(store)) == sorted((b.lease_id, b.digest) for b in blobs)
    assert artifacts.ingest_many([], holder="t") == []


def test_too_large_fails_the_task_and_leaves_nothing(
    store: Store, clock: FixedClock, db_path: Path, write_file: WriteFile
) -> None:
    small = ArtifactStore(db_path.parent / "artifacts", store, clock, max_file_bytes=10)
    with pytest.raises(TaskError) as caught:
        small.ingest(write_file("big.bin", b"x" * 11), holder="t")
    assert caught.value.code == "artifact.too_large" and caught.value.exit_code == 4
    assert "10 bytes" in caught.value.message
    assert list((small.root / "tmp").iterdir()) == []
    assert _lease_rows(store) == []
    # A per-call cap (the run's maxArtifactBytes) applies on top.
    with pytest.raises(TaskError, match="larger than the artifact size cap of 4 bytes"):
        small.ingest(write_file("mid.bin", b"x" * 5), holder="t", max_bytes=4)
    assert small.ingest(write_file("ok.bin", b"x" * 10), holder="t").size == 10


def test_symlinks_and_folders_are_not_ingested(
    artifacts: ArtifactStore, store: Store, write_file: WriteFile, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"outside the workspace")
    link = write_file("link.txt", b"").parent / "escape.txt"
    link.symlink_to(secret)
    with pytest.raises(TaskError) as caught:
        artifacts.ingest(link, holder="t")
    assert caught.value.code == "artifact.unreadable"
    with pytest.raises(TaskError) as caught:
        artifacts.ingest(link.parent, holder="t")
    assert caught.value.code == "artifact.not_regular"
    assert _lease_rows(store) == []


def test_record_ref_after_the_lease_expired(
    artifacts: ArtifactStore, store: Store, clock: FixedClock, write_file: WriteFile
) -> None:
    kept = artifacts.ingest(write_file("kept.txt", b"kept"), holder="t")
    lost = artifacts.ingest(write_file("lost.txt", b"lost"), holder="t")
    clock.advance(3601)
    # Still on disk: the ref is accepted and now protects the blob.
    with store.write() as conn:
        artifacts.record_ref(conn, kept, run_id="run-1", task_id="t", name="kept")
    report = artifacts.gc(older_than_days=0)
    assert report.removed_blobs == [lost.digest]
    with pytest.raises(TaskError) as caught, store.write() as conn:
        artifacts.record_ref(conn, lost, run_id="run-1", task_id="t", name="lost")
    assert caught.value.code == "artifact.lease_expired"
    assert [r.name for r in artifacts.refs()] == ["kept"]


def test_release_lets_gc_reclaim_at_once(
    artifacts: ArtifactStore, store: Store, write_file: WriteFile
) -> None:
    blob = artifacts.ingest(write_file("a", b"abandoned"), holder="t")
    assert artifacts.gc(older_than_days=0).kept_leased == 1
    with store.write() as conn:
        artifacts.release(conn, [blob])
    assert artifacts.gc(older_than_days=0).removed_blobs == [blob.digest]


def test_record_ref_inside_a_driver_session(
    artifacts: ArtifactStore, store: Store, write_file: WriteFile
) -> None:
    """The executor's hot path writes through a DriverSession, not a Connection."""
    blob = artifacts.ingest(write_file("a", b"driver"), holder="t")
    with store.driver_session() as session, session.write() as conn:
        ref = artifacts.record_ref(conn, blob, run_id="run-1", task_id="t", name="a")
    assert ref.version == 1 and artifacts.latest("a") == ref
    assert ArtifactRef.from_json(ref.to_json()) == ref


class _RewriteAfterHashing:
    """A fault hook that changes the source between the hash pass and the copy."""

    def __init__(self, source: Path, data: bytes) -> None:
        self.source, self.data = source, data

    def hit(self, point: str) -> None:
        if point == "artifact.hashed":
            self.source.write_bytes(self.data)


def test_a_file_changed_during_ingestion_is_stored_as_what_was_copied(
    store: Store, clock: FixedClock, db_path: Path, write_file: WriteFile
) -> None:
    source = write_file("moving.txt", b"before")
    hook = _RewriteAfterHashing(source, b"after!")
    artifacts = ArtifactStore(db_path.parent / "artifacts", store, clock, faults=hook)
    blob = artifacts.ingest(source, holder="t")
    assert blob.digest == digest_bytes(b"after!")
    assert artifacts.layout.blob_path(blob.digest).read_bytes() == b"after!"
    assert not artifacts.layout.blob_path(digest_bytes(b"before")).exists()
    # The lease was re-pointed at the bytes actually stored before they were published.
    assert _lease_rows(store) == [(blob.lease_id, blob.digest)]
    # A file that grows past the cap between the passes is still refused.
    hook.source, hook.data = write_file("grows.txt", b"tiny"), b"x" * 20
    small = ArtifactStore(
        db_path.parent / "artifacts", store, clock, faults=hook, max_file_bytes=10
    )
    with pytest.raises(TaskError) as caught:
        small.ingest(hook.source, holder="t")
    assert caught.value.code == "artifact.too_large"


class _StallPastTheLease:
    """While the copy is in progress, the lease lapses and a gc collects the temp file."""

    def __init__(self, clock: FixedClock) -> None:
        self.clock = clock
        self.artifacts: ArtifactStore | None = None

    def hit(self, point: str) -> None:
        if point == "artifact.chunk_written" and self.artifacts is not None:
            self.clock.advance(3601)
            report = self.artifacts.gc(older_than_days=0)
            assert len(report.removed_temp_files) == 1


def test_a_lease_that_lapses_during_the_copy_fails_the_ingestion(
    store: Store, clock: FixedClock, db_path: Path, write_file: WriteFile
) -> None:
    hook = _StallPastTheLease(clock)
    artifacts = ArtifactStore(db_path.parent / "artifacts", store, clock, faults=hook)
    hook.artifacts = artifacts
    with pytest.raises(TaskError) as caught:
        artifacts.ingest(write_file("slow.bin", b"slow bytes"), holder="t")
    assert caught.value.code == "artifact.lease_expired"
    assert [digest for digest, _ in artifacts.layout.iter_blobs()] == []
    assert _lease_rows(store) == []


def test_a_truncated_blob_is_replaced_by_a_fresh_ingest(
    artifacts: ArtifactStore, write_file: WriteFile, recorded: Callable[..., ArtifactRef]
) -> None:
    ref = recorded(b"0123456789")
    blob = artifacts.layout.blob_path(ref.digest)
    os.chmod(blob, 0o600)
    blob.write_bytes(b"01234")
    artifacts.ingest(write_file("again", b"0123456789"), holder="t")
    assert blob.read_bytes() == b"0123456789"


def test_a_same_size_corrupted_blob_is_repaired_by_a_fresh_ingest(
    artifacts: ArtifactStore,
    store: Store,
    write_file: WriteFile,
    recorded: Callable[..., ArtifactRef],
    add_run: Callable[[str], None],
) -> None:
    ref = recorded(b"0123456789")
    blob = artifacts.layout.blob_path(ref.digest)
    os.chmod(blob, 0o600)
    blob.write_bytes(b"9876543210")  # same size: only the hash tells
    add_run("run-2")
    again = artifacts.ingest(write_file("again", b"0123456789"), holder="t")
    with store.write() as conn:
        second = artifacts.record_ref(conn, again, run_id="run-2", task_id="t", name="again")
    assert second.digest == ref.digest
    assert blob.read_bytes() == b"0123456789"
    assert stat.S_IMODE(blob.stat().st_mode) == 0o400
    report = artifacts.verify()
    assert (report.checked, report.ok, report.problems) == (1, 1, [])


def test_an_intact_blob_is_not_rewritten_by_a_fresh_ingest(
    artifacts: ArtifactStore, write_file: WriteFile, recorded: Callable[..., ArtifactRef]
) -> None:
    ref = recorded(b"stay as you are")
    before = os.stat(artifacts.layout.blob_path(ref.digest))
    artifacts.ingest(write_file("again", b"stay as you are"), holder="t")
    after = os.stat(artifacts.layout.blob_path(ref.digest))
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert list(artifacts.layout.tmp.iterdir()) == []
