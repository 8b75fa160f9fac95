"""A process that performs an effect reads the effect's idempotency key from
``AGENTCTL_IDEMPOTENCY_KEY`` — the key the journal stores — and a resume that runs a
never-started request again hands it the same key (real subprocesses, real SQLite)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.forkserver import run_agentctl

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: keyed}
spec:
  policy:
    approval: never
    processAllowlist: [sh]
  actions:
    call:
      kind: builtin.shell.exec
      command: sh
      args:
        - -c
        - echo $AGENTCTL_IDEMPOTENCY_KEY >> keys.txt; printf %s $AGENTCTL_IDEMPOTENCY_KEY
  tasks:
    - id: charge
      uses: action:call
"""


def _effect_key(cli: Any, db: Path, run_id: str) -> str:
    inspected = cli("--output", "json", "inspect", run_id, "--db", db)
    assert inspected.exit_code == 0, inspected.stderr
    (effect,) = inspected.json()["data"]["effects"]
    assert effect["operation"] == "builtin.shell.exec"
    return str(effect["idempotencyKey"])


def test_shell_process_receives_the_journaled_key(
    cli: Any, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    db = tmp_path / "r.db"
    write_workflow(WORKFLOW)
    first = cli(
        "--output", "json", "roll", workspace / "wf.yaml", "--db", db, "--workspace", workspace
    )
    assert first.exit_code == 0, first.stderr
    run_id = first.json()["data"]["runId"]
    key = _effect_key(cli, db, run_id)
    assert key
    assert first.json()["data"]["output"]["charge"]["stdout"] == key

    second = cli(
        "--output", "json", "roll", workspace / "wf.yaml", "--db", db, "--workspace", workspace
    )
    other = _effect_key(cli, db, second.json()["data"]["runId"])
    assert other != key  # another run is another request


def _killed_at(fault: str, workspace: Path, db: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}
    env["AGENTCTL_FAULT"] = fault
    killed = run_agentctl(
        ["--output", "json", "roll", "wf.yaml", "--db", str(db)],
        cwd=workspace,
        env=env,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    assert not (workspace / "keys.txt").exists()


def test_resumed_request_keeps_its_key(
    cli: Any, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    """A gated effect killed after its ``requested`` row committed is asked for again on
    resume (never dispatched unapproved), then dispatched once with its journaled key."""
    db = tmp_path / "r.db"
    write_workflow(WORKFLOW.replace("approval: never", "approval: always"))
    _killed_at("effect.requested", workspace, db)
    runs = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"]
    run_id = runs[0]["runId"]

    resumed = cli("--output", "json", "resume", run_id, "--db", db, "--workspace", workspace)
    assert resumed.exit_code == 3, resumed.stderr  # waits for its approval
    assert not (workspace / "keys.txt").exists()
    inspected = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    (pending,) = [a["approvalId"] for a in inspected["approvals"] if a["status"] == "pending"]
    approved = cli("approvals", "approve", pending, "--reason", "ok", "--db", db)
    assert approved.exit_code == 0, approved.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", db, "--workspace", workspace)
    assert resumed.exit_code == 0, resumed.stderr
    key = _effect_key(cli, db, run_id)
    assert (workspace / "keys.txt").read_text().split() == [key]


def test_an_ungated_effect_killed_before_its_dispatch_is_uncertain(
    cli: Any, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    """An effect that needs no approval is journaled ``started`` in its one commit before
    the dispatch: a kill at either fault point there leaves it started, and resume parks
    it uncertain (at-most-once: nobody knows it was not sent) instead of sending it."""
    db = tmp_path / "r.db"
    write_workflow(WORKFLOW)
    _killed_at("effect.requested", workspace, db)
    runs = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"]
    run_id = runs[0]["runId"]
    inspected = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    assert [e["status"] for e in inspected["effects"]] == ["started"]

    resumed = cli("--output", "json", "resume", run_id, "--db", db, "--workspace", workspace)
    assert resumed.exit_code == 3, resumed.stderr
    assert not (workspace / "keys.txt").exists()
    inspected = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    assert [e["status"] for e in inspected["effects"]] == ["uncertain"]
