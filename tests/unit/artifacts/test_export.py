"""export: atomic, verified, never overwrites silently, never leaves the base folder."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentctl.artifacts import ArtifactRef, ArtifactStore
from agentctl.errors import NotFoundError, PersistenceError, UsageError


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "exports"
    folder.mkdir()
    return folder


@pytest.fixture
def ref(recorded: Callable[..., ArtifactRef]) -> ArtifactRef:
    return recorded(b"exported bytes\n")


def test_export_writes_the_bytes_and_creates_folders(
    artifacts: ArtifactStore, ref: ArtifactRef, base: Path
) -> None:
    result = artifacts.export(ref.digest, "out/deep/report.txt", base=base)
    target = base / "out" / "deep" / "report.txt"
    assert result.path == str(target) and result.size == 15
    assert target.read_bytes() == b"exported bytes\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.txt"]


def test_export_refuses_to_overwrite_without_the_flag(
    artifacts: ArtifactStore, ref: ArtifactRef, base: Path
) -> None:
    (base / "exists.txt").write_text("keep me")
    with pytest.raises(UsageError) as caught:
        artifacts.export(ref.digest, "exists.txt", base=base)
    assert caught.value.code == "artifact.destination_exists"
    assert caught.value.hint == "pass --force to replace it"
    assert (base / "exists.txt").read_text() == "keep me"
    artifacts.export(ref.digest, "exists.txt", base=base, overwrite=True)
    assert (base / "exists.txt").read_bytes() == b"exported bytes\n"
    assert sorted(p.name for p in base.iterdir()) == ["exists.txt"]


@pytest.mark.parametrize("dest", ["../escape.txt", "a/../../escape.txt", "/etc/agentctl-x"])
def test_export_refuses_path_traversal(
    artifacts: ArtifactStore, ref: ArtifactRef, base: Path, dest: str
) -> None:
    with pytest.raises(UsageError) as caught:
        artifacts.export(ref.digest, dest, base=base)
    assert caught.value.code == "artifact.path_traversal"
    assert not (base.parent / "escape.txt").exists()


def test_export_refuses_symlink_escape(
    artifacts: ArtifactStore, ref: ArtifactRef, base: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (base / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UsageError) as caught:
        artifacts.export(ref.digest, "linked/new/x.txt", base=base)
    assert caught.value.code == "artifact.symlink_escape"
    (base / "file-link").symlink_to(outside / "target.txt")
    with pytest.raises(UsageError) as caught:
        artifacts.export(ref.digest, "file-link", base=base, overwrite=True)
    assert caught.value.code == "artifact.symlink_escape"
    assert list(outside.iterdir()) == []
    # A link that stays inside the base folder is fine.
    (base / "inner").mkdir()
    (base / "alias").symlink_to(base / "inner", target_is_directory=True)
    artifacts.export(ref.digest, "alias/ok.txt", base=base)
    assert (base / "inner" / "ok.txt").read_bytes() == b"exported bytes\n"


def test_export_refuses_a_directory_destination(
    artifacts: ArtifactStore, ref: ArtifactRef, base: Path
) -> None:
    (base / "dir").mkdir()
    with pytest.raises(UsageError) as caught:
        artifacts.export(ref.digest, "dir", base=base, overwrite=True)
    assert caught.value.code == "artifact.destination_is_directory"


def test_export_refuses_corrupt_or_missing_bytes(
    artifacts: ArtifactStore, ref: ArtifactRef, base: Path
) -> None:
    blob = artifacts.layout.blob_path(ref.digest)
    os.chmod(blob, 0o600)
    blob.write_bytes(b"EXPORTED BYTES\n")
    with pytest.raises(PersistenceError) as caught:
        artifacts.export(ref.digest, "x.txt", base=base)
    assert caught.value.code == "artifact.corrupt" and caught.value.exit_code == 5
    assert list(base.iterdir()) == []  # no temporary file left behind
    blob.unlink()
    with pytest.raises(PersistenceError) as caught:
        artifacts.export(ref.digest, "x.txt", base=base)
    assert caught.value.code == "artifact.missing"
    with pytest.raises(NotFoundError):
        artifacts.export("sha256:" + "1" * 64, "x.txt", base=base)
