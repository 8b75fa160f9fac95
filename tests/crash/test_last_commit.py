"""The last batch's transitions and the run's completion commit together.

A real ``agentctl roll`` is SIGKILLed right after its last task's transition committed
(``task.committed`` at the last task). That commit also recorded the run's end, so the
killed run is found finished, consistent and released: resuming it answers its stored
result and runs nothing again.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.crash.cli import cli

pytestmark = pytest.mark.crash

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: last-commit}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    set: {kind: builtin.assign}
    append: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo last >> ledger.txt"]}
  outputs: {first: "${{ tasks.one.output.output.i }}"}
  tasks:
    - {id: one, uses: "action:set", with: {i: 1}}
    - {id: two, uses: "action:set", with: {i: 2}, needs: [one]}
    - {id: three, uses: "action:append", needs: [two]}
"""


def _agentctl(ws: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli([*args, "--db", "runs.db"], ws, {"AGENTCTL_FAULT": fault} if fault else None)


def test_a_kill_after_the_last_task_committed_leaves_the_run_finished(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    killed = _agentctl(tmp_path, "roll", "wf.yaml", fault="task.committed:3")
    assert killed.returncode == -9, killed.stderr
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        run_id, status, owner, output = conn.execute(
            "SELECT id, status, owner_id, output_json FROM runs"
        ).fetchone()
        tasks = dict(conn.execute("SELECT task_id, status FROM tasks"))
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    assert (status, owner, json.loads(output)) == ("succeeded", None, {"first": 1})
    assert tasks == {"one": "succeeded", "two": "succeeded", "three": "succeeded"}

    resumed = _agentctl(tmp_path, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["data"]["output"] == {"first": 1}
    assert (tmp_path / "ledger.txt").read_text() == "last\n"  # its effect ran once
    verified = _agentctl(tmp_path, "audit", run_id, "--verify")
    assert verified.returncode == 0, verified.stderr


def test_a_kill_before_the_last_task_leaves_it_to_the_resume(tmp_path: Path) -> None:
    """One transition earlier the run is still running: the resume runs the last task
    and finishes the run in that task's commit."""
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    killed = _agentctl(tmp_path, "roll", "wf.yaml", fault="task.committed:2")
    assert killed.returncode == -9, killed.stderr
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        run_id, status = conn.execute("SELECT id, status FROM runs").fetchone()
    conn.close()
    assert status == "running"
    resumed = _agentctl(tmp_path, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["data"]["output"] == {"first": 1}
    assert (tmp_path / "ledger.txt").read_text() == "last\n"
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        events = [row[0] for row in conn.execute("SELECT kind FROM audit_events ORDER BY seq")]
    conn.close()
    assert events[-2:] == ["task.succeeded", "run.succeeded"]
