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
from tests.forkserver import ForkedProcess, run_agentctl, start_agentctl


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


def _two_runs_workflow(name: str, script: str, artifacts: str = "") -> str:
    return f"""apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: {name}}}
spec:
  policy: {{approval: never, writableRoots: [out], processAllowlist: [sh]}}
  actions:
    run: {{kind: builtin.shell.exec, command: sh, args: ["-c", "{script}"]}}
  tasks:
    - id: work
      uses: action:run{artifacts}
"""


def _artifact_names(database: Path, run_id: str) -> list[str]:
    shown = run_agentctl(
        ["--output", "json", "inspect", run_id, "--db", str(database)], timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    import json

    return sorted(a["name"] for a in json.loads(shown.stdout)["data"]["artifacts"])


def test_a_shell_task_never_takes_a_concurrent_runs_file_for_its_own(
    workspace: Path, tmp_path: Path
) -> None:
    """Two runs in one workspace, two `agentctl roll` processes on one database. Run A's
    process is running (past its before-scan) while run B's process writes `out/b.txt`,
    then A's process ends: A's after-scan sees a file it did not write. Two FIFOs order
    the processes (no sleeps): A announces it runs, B writes its file and releases A."""
    import json
    import os
    import subprocess

    (workspace / "out").mkdir()
    os.mkfifo(workspace / "a-runs")
    os.mkfifo(workspace / "b-wrote")
    (workspace / "a.yaml").write_text(
        _two_runs_workflow("run-a", "echo up > a-runs; cat b-wrote > /dev/null")
    )
    (workspace / "b.yaml").write_text(
        _two_runs_workflow(
            "run-b",
            "cat a-runs > /dev/null; echo b > out/b.txt; echo done > b-wrote",
            "\n      artifacts: [{name: report, path: out/b.txt}]",
        )
    )
    database = tmp_path / "state" / "r.db"

    def roll(name: str) -> ForkedProcess | subprocess.Popen[str]:
        return start_agentctl(
            ["--output", "json", "roll", name, "--db", str(database)],
            cwd=workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    first, second = roll("a.yaml"), roll("b.yaml")
    out_a, err_a = first.communicate(timeout=300)
    out_b, err_b = second.communicate(timeout=300)
    assert first.returncode == 0, err_a
    assert second.returncode == 0, err_b
    run_a = json.loads(out_a)["data"]["runId"]
    run_b = json.loads(out_b)["data"]["runId"]

    # A's process wrote nothing: B's file is not A's artifact.
    assert _artifact_names(database, run_a) == []
    # B declared the file it writes: it is B's, whoever else ran meanwhile.
    assert _artifact_names(database, run_b) == ["report"]
    # A's output says which files appeared that it could not attribute.
    output_a = json.loads(out_a)["data"]["output"]["work"]
    assert output_a["unattributedFiles"] == ["out/b.txt"]


def test_writer_windows_are_shared_exactly_when_they_overlap(tmp_path: Path) -> None:
    from agentctl.engine.actions.workspace_writers import open_window

    first = open_window(tmp_path, expected_seconds=10)
    assert first.close() is False  # alone from open to close
    second = open_window(tmp_path, expected_seconds=10)
    assert second.close() is False  # the first one was closed before it opened

    outer = open_window(tmp_path, expected_seconds=10)
    inner = open_window(tmp_path, expected_seconds=10)  # opens while outer is open
    assert inner.close() is True
    assert outer.close() is True  # another one opened (and closed) meanwhile
    assert outer.close() is True  # closing again changes nothing

    early = open_window(tmp_path, expected_seconds=10)
    late = open_window(tmp_path, expected_seconds=10)
    assert early.close() is True  # late opened before early closed
    assert late.close() is True  # early was open when late opened


def test_a_window_left_by_a_killed_process_does_not_block_attribution(tmp_path: Path) -> None:
    """A task SIGKILLed mid-process leaves its window behind; the next task on this host
    sees that its process is gone and is not counted as sharing the workspace with it."""
    import subprocess
    import sys

    from agentctl.engine.actions.workspace_writers import open_window

    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys; from pathlib import Path;"
            "from agentctl.engine.actions.workspace_writers import open_window;"
            "open_window(Path(sys.argv[1]), expected_seconds=3600);"
            "os.kill(os.getpid(), signal.SIGKILL)",
            str(tmp_path),
        ],
        check=False,
        timeout=120,
    )
    assert killed.returncode == -9
    assert (tmp_path / ".agentctl" / "writers" / "state.json").read_text().count("pid") == 1
    window = open_window(tmp_path, expected_seconds=10)
    assert window.close() is False


def test_the_writer_registry_is_never_scanned_as_written_files(tmp_path: Path) -> None:
    workspace = WorkspacePolicy(tmp_path, ".", ["."])
    before = written_files.snapshot(workspace)
    from agentctl.engine.actions.workspace_writers import open_window

    window = open_window(tmp_path, expected_seconds=10)
    (tmp_path / "mine.txt").write_text("mine")
    assert window.close() is False
    assert [name for name, _ in written_files.changed_files(workspace, before)] == ["mine.txt"]
