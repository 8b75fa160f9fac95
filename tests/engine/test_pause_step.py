"""`builtin.pause` parks a run until `agentctl resume RUN`; a parked dry run says its state
is gone instead of printing commands that cannot work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PAUSING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: staged}
spec:
  policy: {approval: never, writableRoots: [out]}
  actions:
    hold: {kind: builtin.pause}
    save: {kind: builtin.write}
  tasks:
    - id: hold
      uses: action:hold
      with: {message: "check the staging dashboard, then resume"}
    - id: ship
      uses: action:save
      needs: [hold]
      with: {path: out/shipped.txt, content: "shipped after ${{ tasks.hold.output.message }}"}
"""


def test_pause_parks_until_resume(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(PAUSING)
    db = tmp_path / "r.db"
    parked = cli("--output", "json", "roll", path, "--db", db)
    assert parked.exit_code == 3, parked.stderr
    data = parked.json()["data"]
    assert data["state"] == "paused"
    assert data["pausedTasks"] == ["hold"] and "pendingApprovals" not in data
    assert not (workspace / "out").exists()
    run_id = data["runId"]
    inspection = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    tasks = {t["taskId"]: t for t in inspection["tasks"]}
    assert tasks["hold"]["state"] == "waiting_for_approval"
    assert tasks["hold"]["error"] == {
        "code": "task.paused",
        "message": "check the staging dashboard, then resume",
    }
    assert inspection["approvals"] == []
    # No approval record: `resume` itself is the operator's go-ahead.
    human = cli("inspect", run_id, "--db", db)
    assert "check the staging dashboard" in human.stdout
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    output = resumed.json()["data"]["output"]
    assert output["hold"]["paused"] is True
    assert (workspace / "out" / "shipped.txt").read_text() == (
        "shipped after check the staging dashboard, then resume"
    )


def test_pause_human_output_names_resume(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    parked = cli("roll", write_workflow(PAUSING), "--db", tmp_path / "r.db")
    assert parked.exit_code == 3
    assert "paused by hold (builtin.pause)" in parked.stdout
    assert "next: agentctl resume run-" in parked.stdout
    assert "approvals approve" not in parked.stdout


def test_parked_dry_run_says_its_state_is_gone(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow(PAUSING)
    parked = cli("roll", path, "--dry-run")
    assert parked.exit_code == 3
    assert "its state (kept in memory) is gone" in parked.stdout
    assert "agentctl resume" not in parked.stdout
    machine = cli("--output", "json", "roll", path, "--dry-run")
    assert "run without --dry-run to continue past hold" in machine.json()["data"]["note"]
    approving = path.parent / "approve.yaml"
    approving.write_text(
        PAUSING.replace("approval: never", "approval: always").replace(
            '      uses: action:hold\n      with: {message: "check the staging dashboard, then '
            'resume"}\n',
            "      uses: action:save\n      with: {path: out/a.txt, content: a}\n",
        )
    )
    gated = cli("roll", approving, "--dry-run")
    assert gated.exit_code == 3, gated.stderr
    assert "approvals approve" not in gated.stdout
    assert "is gone" in gated.stdout
