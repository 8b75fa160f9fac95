"""retry, repair, fork and compensate work where the source run worked: its recorded
workspace, not the workflow file's folder; ``--workspace`` overrides, and the printed
next-step commands work as printed (docs/durable-execution.md)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

# `check` succeeds only once `ready` exists in the workspace; `step` counts its runs there.
PIPELINE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: in-workspace}}
spec:
  policy: {{approval: never, processAllowlist: [sh], writableRoots: ["."]}}
  actions:
    count: {{kind: builtin.shell.exec, command: sh, args: ["-c", "echo run >> counter"]}}
    check: {{kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}}
    put: {{kind: builtin.write}}
  tasks:
    - {{id: step, uses: "action:count"}}
    - {{id: check, uses: "action:check", needs: [step]}}
    - id: write
      uses: action:put
      needs: [check]
      with: {{path: out.txt, content: "{label}"}}
      compensate: {{uses: "action:put", with: {{path: out.txt, content: undone}}}}
"""


def _layout(tmp_path: Path, label: str = "v1") -> tuple[Path, Path, Path]:
    """The workflow file in one folder, the workspace the run is rolled in another."""
    flows, workspace = tmp_path / "flows", tmp_path / "ws"
    flows.mkdir()
    workspace.mkdir()
    path = flows / "wf.yaml"
    path.write_text(PIPELINE.format(label=label))
    return path, workspace, tmp_path / "r.db"


def _failed_roll(cli: Any, path: Path, workspace: Path, db: Path) -> dict[str, Any]:
    result = cli("--output", "json", "roll", path, "--workspace", workspace, "--db", db)
    assert result.exit_code == 4, result.stderr
    return dict(result.error_json()["error"])


def _run_printed(cli: Any, command: str) -> Any:
    argv = shlex.split(command)
    assert argv[0] == "agentctl"
    return cli("--output", "json", *argv[1:])


def _next_commands(cli: Any, run_id: str, db: Path) -> list[str]:
    data = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    return [step["command"] for step in data["next"]]


def test_printed_retry_runs_in_the_recorded_workspace(cli: Any, tmp_path: Path) -> None:
    path, workspace, db = _layout(tmp_path)
    error = _failed_roll(cli, path, workspace, db)
    assert (workspace / "counter").read_text() == "run\n"
    (workspace / "ready").touch()
    retry = next(c for c in _next_commands(cli, error["runId"], db) if " retry " in c)
    assert f"--workspace {workspace}" in retry
    result = _run_printed(cli, retry)
    assert result.exit_code == 0, result.stderr
    # Reused the successful step (not run again), ran the rest in the same workspace.
    assert (workspace / "counter").read_text() == "run\n"
    assert (workspace / "out.txt").read_text() == "v1"
    assert not (path.parent / "counter").exists() and not (path.parent / "out.txt").exists()
    retried = result.json()["data"]["runId"]
    run = cli("--output", "json", "inspect", retried, "--db", db).json()["data"]["run"]
    assert run["workspace"] == str(workspace)


def test_retry_and_repair_without_workspace_default_to_the_recorded_one(
    cli: Any, tmp_path: Path
) -> None:
    path, workspace, db = _layout(tmp_path)
    run_id = _failed_roll(cli, path, workspace, db)["runId"]
    (workspace / "ready").touch()
    planned = cli("--output", "json", "retry", path, run_id, "--failed", "--plan", "--db", db)
    assert planned.exit_code == 0, planned.stderr
    assert [(t["taskId"], t["action"]) for t in planned.json()["data"]["tasks"]] == [
        ("step", "reuse"),
        ("check", "execute"),
        ("write", "execute"),
    ]
    path.write_text(PIPELINE.format(label="v2"))
    repaired = cli("--output", "json", "repair", path, run_id, "--db", db)
    assert repaired.exit_code == 0, repaired.stderr
    assert (workspace / "out.txt").read_text() == "v2"
    assert not (path.parent / "out.txt").exists()


def test_workspace_option_overrides_and_is_recorded(cli: Any, tmp_path: Path) -> None:
    path, workspace, db = _layout(tmp_path)
    run_id = _failed_roll(cli, path, workspace, db)["runId"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "ready").touch()
    result = cli(
        "--output", "json", "retry", path, run_id, "--failed", "--workspace", other, "--db", db
    )
    assert result.exit_code == 0, result.stderr
    assert (other / "out.txt").read_text() == "v1"
    assert not (workspace / "out.txt").exists()


def test_fork_and_compensate_work_in_the_recorded_workspace_or_the_given_one(
    cli: Any, tmp_path: Path
) -> None:
    path, workspace, db = _layout(tmp_path)
    (workspace / "ready").touch()
    rolled = cli("--output", "json", "roll", path, "--workspace", workspace, "--db", db)
    assert rolled.exit_code == 0, rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    forked = cli("--output", "json", "fork", run_id, "--db", db)
    assert forked.exit_code == 0, forked.stderr
    assert (workspace / "counter").read_text() == "run\nrun\n"
    # A fork told where to work records it, so resuming or retrying it stays there.
    other = tmp_path / "other"
    other.mkdir()
    (other / "ready").touch()
    elsewhere = cli("--output", "json", "fork", run_id, "--workspace", other, "--db", db)
    assert elsewhere.exit_code == 0, elsewhere.stderr
    fork_id = elsewhere.json()["data"]["runId"]
    fork_run = cli("--output", "json", "inspect", fork_id, "--db", db).json()["data"]["run"]
    assert fork_run["workspace"] == str(other)
    assert (other / "counter").read_text() == "run\n"
    compensated = cli("--output", "json", "compensate", fork_id, "--db", db)
    assert compensated.exit_code == 0, compensated.stderr
    assert (other / "out.txt").read_text() == "undone"
    assert (workspace / "out.txt").read_text() == "v1"
    compensation = compensated.json()["data"]["runId"]
    data = cli("--output", "json", "inspect", compensation, "--db", db).json()["data"]
    assert data["run"]["workspace"] == str(other)


def test_a_recorded_workspace_that_is_gone_is_named(cli: Any, tmp_path: Path) -> None:
    path, workspace, db = _layout(tmp_path)
    run_id = _failed_roll(cli, path, workspace, db)["runId"]
    shutil.rmtree(workspace)
    result = cli("--output", "json", "retry", path, run_id, "--failed", "--db", db)
    assert result.exit_code == 2
    error = json.loads(result.stderr)["error"]
    assert str(workspace) in error["message"] and run_id in error["message"]
    assert "--workspace" in error["hint"]
