"""A process task's written files while another run writes in the same workspace.

The cause of an intermittent `failed` run when two workers executed runs of one workflow
in one workspace: a `builtin.write` of run A creates a temporary file under `out/` and
renames it over its target; the shell task of run B, scanning `out/` before and after its
process, took A's temporary file for its own work, journaled its signature, and failed
with `artifact.missing` once the rename had removed it. Temporary files of atomic writes
are never anyone's artifact, and a file that vanished since the scan is not ingested.
"""

from __future__ import annotations

from pathlib import Path

from agentctl.engine.actions import written_files
from agentctl.policy.paths import WorkspacePolicy
from agentctl.tools.files import write_atomic


def _workspace(tmp_path: Path) -> WorkspacePolicy:
    (tmp_path / "out").mkdir()
    return WorkspacePolicy(tmp_path, ".", ["out"])


def test_a_temporary_file_of_an_atomic_write_is_not_a_written_file(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    before = written_files.snapshot(workspace)
    # What `builtin.write` of another run has on disk between its mkstemp and its rename.
    (tmp_path / "out" / ".t0.txt.k2x9_a7q.tmp").write_text("t0")
    (tmp_path / "out" / "mine.txt").write_text("mine")
    changed = written_files.changed_files(workspace, before)
    assert [name for name, _ in changed] == ["out/mine.txt"]


def test_a_file_removed_after_the_scan_is_not_journaled(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    before = written_files.snapshot(workspace)
    (tmp_path / "out" / "gone.txt").write_text("x")
    (tmp_path / "out" / "kept.txt").write_text("y")
    changed = written_files.changed_files(workspace, before)
    (tmp_path / "out" / "gone.txt").unlink()  # another process removed it meanwhile
    signed = written_files.signatures(changed)
    assert [entry[0] for entry in signed] == ["out/kept.txt"]
    recorded = written_files.recorded_files(workspace, signed)
    assert [name for name, _ in recorded] == ["out/kept.txt"]


def test_the_pattern_matches_what_write_atomic_creates(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The recognised name is the one write_atomic really uses (caught mid-write)."""
    import os

    from agentctl.tools import files

    seen: list[str] = []
    real_replace = os.replace

    def spy(source: str, target: object) -> None:
        seen.append(Path(source).name)
        real_replace(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(files.os, "replace", spy)
    write_atomic(tmp_path / "report.txt", "done")
    assert len(seen) == 1 and files.is_atomic_temp(seen[0])
    assert not files.is_atomic_temp("report.txt") and not files.is_atomic_temp(".env")
