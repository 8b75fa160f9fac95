"""verify and reuse_check find missing and corrupt bytes and name the refs they break."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentctl.artifacts import ArtifactRef, ArtifactStore
from agentctl.errors import NotFoundError, UsageError
from agentctl.store.engine import Store


def _corrupt(artifacts: ArtifactStore, digest: str, data: bytes) -> Path:
    blob = artifacts.layout.blob_path(digest)
    os.chmod(blob, 0o600)
    blob.write_bytes(data)
    return blob


def test_verify_all_reports_corrupt_and_missing_blobs(
    artifacts: ArtifactStore, recorded: Callable[..., ArtifactRef]
) -> None:
    good = recorded(b"good bytes", name="good.txt")
    bad = recorded(b"original", name="bad.txt")
    gone = recorded(b"soon gone", name="gone.txt")
    bad_path = _corrupt(artifacts, bad.digest, b"tampered")  # same size: only the hash tells
    artifacts.layout.blob_path(gone.digest).unlink()
    report = artifacts.verify()
    assert (report.checked, report.ok) == (3, 1)
    problems = {p.digest: p for p in report.problems}
    assert problems[bad.digest].kind == "corrupt"
    assert problems[bad.digest].path == str(bad_path)
    assert problems[bad.digest].name == "bad.txt" and problems[bad.digest].task_id == "write"
    assert problems[gone.digest].kind == "missing"
    assert "gone.txt" in problems[gone.digest].message
    assert good.digest not in problems
    assert artifacts.inspect(good.digest).verified_at is not None
    assert artifacts.inspect(bad.digest).verified_at is None


def test_verify_one_blob_by_prefix(
    artifacts: ArtifactStore, recorded: Callable[..., ArtifactRef]
) -> None:
    ref = recorded(b"prefix me")
    report = artifacts.verify(ref.digest.removeprefix("sha256:")[:10])
    assert (report.checked, report.ok, report.problems) == (1, 1, [])
    _corrupt(artifacts, ref.digest, b"prefix m3")
    assert [p.kind for p in artifacts.verify(ref.digest).problems] == ["corrupt"]


def test_verify_checks_untracked_blobs_too(
    artifacts: ArtifactStore, write_file: Callable[[str, bytes], Path]
) -> None:
    blob = artifacts.ingest(write_file("x", b"leased only"), holder="t")
    _corrupt(artifacts, blob.digest, b"LEASED ONLY")
    [problem] = artifacts.verify().problems
    assert (problem.digest, problem.kind, problem.name) == (blob.digest, "corrupt", None)


def test_unknown_and_malformed_digests(artifacts: ArtifactStore) -> None:
    with pytest.raises(NotFoundError) as caught:
        artifacts.verify("sha256:" + "0" * 64)
    assert caught.value.code == "artifact.not_found" and caught.value.exit_code == 5
    with pytest.raises(UsageError) as bad:
        artifacts.inspect("not-a-digest")
    assert bad.value.code == "artifact.bad_digest" and bad.value.exit_code == 2


def test_reuse_check_blocks_missing_and_corrupt_bytes(
    artifacts: ArtifactStore, store: Store, recorded: Callable[..., ArtifactRef]
) -> None:
    intact = recorded(b"fine", name="fine")
    corrupt = recorded(b"flip", name="flip")
    missing = recorded(b"lost", name="lost")
    with store.read() as conn:
        assert artifacts.reuse_check(conn, artifacts.refs()) == []
    _corrupt(artifacts, corrupt.digest, b"flop")
    artifacts.layout.blob_path(missing.digest).unlink()
    with store.read() as conn:
        problems = artifacts.reuse_check(conn, artifacts.refs(run_id="run-1"))
    assert sorted((p.name, p.kind) for p in problems) == [("flip", "corrupt"), ("lost", "missing")]
    assert all(p.run_id == "run-1" for p in problems)
    assert intact.digest not in {p.digest for p in problems}


def test_reuse_check_of_a_manifest_whose_blob_row_is_gone(
    artifacts: ArtifactStore, store: Store, recorded: Callable[..., ArtifactRef]
) -> None:
    ref = recorded(b"manifest entry")
    manifest = [ref.to_json()]
    with store.write() as conn:
        conn.exec_driver_sql("DELETE FROM artifact_refs")
        conn.exec_driver_sql("DELETE FROM artifact_blobs")
    with store.read() as conn:
        [problem] = artifacts.reuse_check(conn, [ArtifactRef.from_json(m) for m in manifest])
    assert problem.kind == "missing" and "not in the database" in problem.message
