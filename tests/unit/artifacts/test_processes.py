"""Real processes: concurrent ingestion of the same bytes, and SIGKILL at the crash points
(mid-ingestion, and gc between quarantine and commit)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentctl.artifacts import ArtifactStore
from agentctl.digest import digest_bytes
from agentctl.ids import FixedClock
from agentctl.store.engine import Store

REPO = Path(__file__).resolve().parents[3]

INGEST = """
import sys
from agentctl.artifacts import ArtifactStore
from agentctl.engine.core.faults import Faults
from agentctl.ids import SystemClock
from agentctl.store.engine import open_store

db, source, holder = sys.argv[1:4]
with open_store(db) as store:
    artifacts = ArtifactStore.beside(store, SystemClock(), faults=Faults())
    sys.stdin.readline()  # the parent releases every process at once
    blob = artifacts.ingest(source, holder=holder)
    print(blob.digest, blob.lease_id, flush=True)
"""

GC = """
import sys
from agentctl.artifacts import ArtifactStore
from agentctl.engine.core.faults import Faults
from agentctl.ids import SystemClock
from agentctl.store.engine import open_store

with open_store(sys.argv[1]) as store:
    ArtifactStore.beside(store, SystemClock(), faults=Faults()).gc(older_than_days=0)
"""


def _spawn(script: str, *args: str | Path, fault: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "AGENTCTL_SQLITE_SYNCHRONOUS": "OFF"}
    env.pop("AGENTCTL_FAULT", None)
    if fault is not None:
        env["AGENTCTL_FAULT"] = fault
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _leases(store: Store) -> list[tuple[str, str | None]]:
    with store.read() as conn:
        rows = conn.exec_driver_sql("SELECT id, blob_digest FROM artifact_leases ORDER BY id")
        return [(str(r[0]), r[1]) for r in rows]


def test_two_processes_ingesting_the_same_bytes_make_one_blob(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    root = db_path.parent / "artifacts"
    for round_ in range(3):
        data = os.urandom(2 * 1024 * 1024) + bytes([round_])
        sources = []
        for side in ("a", "b"):
            source = tmp_path / f"{side}{round_}.bin"
            source.write_bytes(data)
            sources.append(source)
        procs = [_spawn(INGEST, db_path, src, f"holder-{i}") for i, src in enumerate(sources)]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=60) for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], outputs
        digests = {out.split()[0] for out, _ in outputs}
        assert digests == {digest_bytes(data)}
        hex_ = digest_bytes(data).removeprefix("sha256:")
        assert (root / "blobs" / hex_[:2] / hex_[2:]).read_bytes() == data
    blobs = [p for p in (root / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 3
    assert list((root / "tmp").iterdir()) == []
    leases = _leases(store)
    assert len(leases) == 6 and all(digest is not None for _, digest in leases)


@pytest.mark.crash
def test_sigkill_during_ingestion_leaves_no_blob_and_gc_cleans_the_temp_file(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    source = tmp_path / "big.bin"
    data = os.urandom(8 * 1024 * 1024)
    source.write_bytes(data)
    proc = _spawn(INGEST, db_path, source, "victim", fault="artifact.chunk_written:3")
    _, err = proc.communicate("go\n", timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    root = db_path.parent / "artifacts"
    [partial] = list((root / "tmp").iterdir())
    assert partial.stat().st_size == 3 * 1024 * 1024
    assert [p for p in (root / "blobs").rglob("*") if p.is_file()] == []
    [(lease_id, bound)] = _leases(store)
    # The lease was committed before the first byte was written, naming the digest.
    assert partial.name == f"{lease_id}.part" and bound == digest_bytes(data)
    later = FixedClock(datetime.now(UTC))
    artifacts = ArtifactStore(root, store, later)
    # The lease is still live: the bytes might belong to a slow writer.
    assert artifacts.gc(older_than_days=0).removed_temp_files == []
    assert partial.exists()
    later.advance(3601)
    report = artifacts.gc(older_than_days=0)
    assert report.removed_temp_files == [str(partial)] and report.expired_leases == 1
    assert list((root / "tmp").iterdir()) == [] and _leases(store) == []
    assert report.removed_blobs == []


@pytest.mark.crash
def test_sigkill_between_quarantine_and_commit_is_undone_then_redone(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    root = db_path.parent / "artifacts"
    past = FixedClock(datetime.now(UTC) - timedelta(days=2))
    artifacts = ArtifactStore(root, store, past)
    tracked_source = tmp_path / "tracked.txt"
    tracked_source.write_bytes(b"recorded by a run that was then deleted")
    blob = artifacts.ingest(tracked_source, holder="t")
    with store.write() as conn:
        artifacts.record_ref(conn, blob, run_id="run-1", task_id="t", name="tracked")
        conn.exec_driver_sql("DELETE FROM runs WHERE id = 'run-1'")
    loose_source = tmp_path / "loose.txt"
    loose_source.write_bytes(b"ingested, never recorded")
    loose = artifacts.ingest(loose_source, holder="t")
    with store.write() as conn:
        artifacts.release(conn, [loose])

    proc = _spawn(GC, db_path, fault="artifact.gc.quarantined")
    _, err = proc.communicate("", timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    quarantined = sorted(p.name for p in (root / "quarantine").iterdir())
    assert quarantined == sorted(d.removeprefix("sha256:") for d in (blob.digest, loose.digest))

    # The gc transaction never committed: the tracked blob's row is back, so it is restored;
    # the loose blob had no row, ref or lease, so its deletion is completed.
    reopened = ArtifactStore(root, store, past)
    assert {digest for digest, _ in reopened.layout.iter_blobs()} == {blob.digest}
    assert list((root / "quarantine").iterdir()) == []
    assert reopened.inspect(blob.digest).tracked
    assert reopened.verify().problems == []
    # A gc that completes removes the unreferenced blob and its row for good.
    now = ArtifactStore(root, store, FixedClock(datetime.now(UTC)))
    assert now.gc(older_than_days=0).removed_blobs == [blob.digest]
    with store.read() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM artifact_blobs").scalar_one() == 0
