"""Uncertain effects, reconciliation, cancellation and run ownership across processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.forkserver import start_agentctl

SLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: slow}}
spec:
  policy: {{approval: never, processAllowlist: [sh]}}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "{script}"]
      timeoutSeconds: {timeout}
  tasks:
    - id: step
      uses: action:work
"""


def _agentctl(*args: str | Path, cwd: Path) -> Any:
    """A real agentctl process (forked from a server that imported agentctl once)."""
    return start_agentctl(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(path: Path, proc: Any, limit: float = 30.0) -> None:
    """Wait until the child process reached a point it announces with a marker file."""
    deadline = time.monotonic() + limit
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "child never reached its marker"
        time.sleep(0.02)


def _run_id(db: Path) -> str:
    import sqlite3

    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    return str(run_id)


def test_timeout_makes_effect_uncertain_then_not_applied_runs_fresh_attempt(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    script = "if [ -f marker ]; then echo second; else touch marker; sleep 20; fi"
    path = write_workflow(SLOW.format(script=script, timeout=3))
    db = tmp_path / "r.db"
    blocked = cli("--output", "json", "roll", path, "--db", db)
    assert blocked.exit_code == 3, blocked.stderr
    data = blocked.json()["data"]
    (effect,) = data["uncertainEffects"]
    assert effect["operation"] == "builtin.shell.exec"
    listed = cli("--output", "json", "reconcile", "--list", "--db", db).json()["data"]
    assert [e["effectId"] for e in listed["effects"]] == [effect["effectId"]]
    # Resume without a conclusion stays blocked and runs nothing.
    assert cli("resume", data["runId"], "--db", db).exit_code == 3
    done = cli(
        "reconcile",
        effect["effectId"],
        "--status",
        "not-applied",
        "--reason",
        "the sleep was killed",
        "--db",
        db,
    )
    assert done.exit_code == 0, done.stderr
    resumed = cli("--output", "json", "resume", data["runId"], "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["data"]["output"]["step"]["stdout"] == "second\n"
    effects = cli("--output", "json", "effects", "list", data["runId"], "--db", db).json()["data"][
        "effects"
    ]
    assert [(e["attempt"], e["status"]) for e in effects] == [(1, "uncertain"), (2, "succeeded")]


def test_applied_reconciliation_reuses_the_validated_result(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(SLOW.format(script="touch ran; sleep 20", timeout=1))
    db = tmp_path / "r.db"
    data = cli("--output", "json", "roll", path, "--db", db).json()["data"]
    (effect,) = data["uncertainEffects"]
    (workspace / "ran").unlink()
    result = {
        "status": "changed",
        "changed": True,
        "exitCode": 0,
        "stdout": "by hand\n",
        "stderr": "",
    }
    (tmp_path / "result.json").write_text(json.dumps(result))
    (tmp_path / "schema.json").write_text(
        json.dumps(
            {"type": "object", "required": ["exitCode"], "properties": {"exitCode": {"const": 0}}}
        )
    )
    (tmp_path / "bad.json").write_text(json.dumps({**result, "exitCode": 1}))
    invalid = cli(
        "reconcile",
        effect["effectId"],
        "--status",
        "applied",
        "--reason",
        "x",
        "--result-file",
        tmp_path / "bad.json",
        "--result-schema-file",
        tmp_path / "schema.json",
        "--db",
        db,
    )
    assert invalid.exit_code == 2 and "schema" in invalid.stderr
    applied = cli(
        "--output",
        "json",
        "effects",
        "reconcile",
        effect["effectId"][:16],
        "--status",
        "applied",
        "--reason",
        "finished by hand",
        "--evidence-file",
        tmp_path / "result.json",
        "--result-file",
        tmp_path / "result.json",
        "--result-schema-file",
        tmp_path / "schema.json",
        "--db",
        db,
    )
    assert applied.exit_code == 0, applied.stderr
    assert applied.json()["data"]["reconciliation"]["resultValidated"] is True
    resumed = cli("--output", "json", "resume", data["runId"], "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["data"]["output"]["step"]["stdout"] == "by hand\n"
    assert not (workspace / "ran").exists()  # the process was not run again


def test_cancel_from_another_process_and_ownership(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(SLOW.format(script="touch started; sleep 30", timeout=60))
    db = tmp_path / "r.db"
    proc = _agentctl("--output", "json", "roll", path, "--db", db, cwd=workspace)
    try:
        _wait_for(workspace / "started", proc)
        run_id = _run_id(db)
        busy = cli("--output", "json", "resume", run_id, "--db", db)
        assert busy.exit_code == 3
        assert busy.error_json()["error"]["code"] == "run.owned"
        assert cli("cancel", run_id, "--reason", "stop it", "--db", db).exit_code == 0
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 130, stderr
        assert "stop it" in json.loads(stderr)["error"]["message"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    inspection = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    assert inspection["run"]["state"] == "cancelled"
    assert [e["status"] for e in inspection["effects"]] == ["uncertain"]
    assert inspection["audit"]["verified"] is True


def test_sigterm_cancels_and_sigkill_leaves_resumable_state(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(SLOW.format(script="touch started; sleep 30", timeout=60))
    db = tmp_path / "term.db"
    proc = _agentctl("roll", path, "--db", db, cwd=workspace)
    _wait_for(workspace / "started", proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    (workspace / "started").unlink()

    killed_db = tmp_path / "kill.db"
    proc = _agentctl("roll", path, "--db", killed_db, cwd=workspace)
    _wait_for(workspace / "started", proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    run_id = _run_id(killed_db)
    # The dead owner's lease is taken over; the started effect becomes uncertain.
    resumed = cli("--output", "json", "resume", run_id, "--db", killed_db)
    assert resumed.exit_code == 3, resumed.stderr
    (effect,) = resumed.json()["data"]["uncertainEffects"]
    assert effect["operation"] == "builtin.shell.exec"


def test_cancel_of_a_paused_run_is_immediate(cli: Any, tmp_path: Path) -> None:
    reference = Path(__file__).resolve().parents[1] / "fixtures" / "reference"
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "incident.txt").write_text("x")
    (ws / "wf.yaml").write_text((reference / "25_2.yaml").read_text())
    db = tmp_path / "r.db"
    run_id = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db).json()["data"]["runId"]
    cancelled = cli("--output", "json", "cancel", run_id, "--db", db)
    assert cancelled.json()["data"]["state"] == "cancelled"
    again = cli("--output", "json", "resume", run_id, "--db", db)
    assert again.exit_code == 130


def _reconcile_on_a_terminal(db: Path, effect_id: str, answer: str, cwd: Path) -> tuple[int, str]:
    """Run `agentctl effects reconcile` with a pseudo-terminal as stdin, typing ``answer``."""
    import pty

    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode() + b"\n")
        child = start_agentctl(
            ["effects", "reconcile", effect_id, "--status", "not-applied"]
            + ["--reason", "checked by hand", "--db", str(db)],
            cwd=cwd,
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        _, stderr = child.communicate(timeout=60)
    finally:
        os.close(terminal)
        os.close(controller)
    assert child.returncode is not None and stderr is not None
    return child.returncode, stderr


def test_reconcile_asks_on_a_terminal_unless_approved(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(SLOW.format(script="sleep 20", timeout=1))
    db = tmp_path / "r.db"
    blocked = cli("--output", "json", "roll", path, "--db", db).json()["data"]
    (effect,) = blocked["uncertainEffects"]
    effect_id = effect["effectId"]

    def status() -> str:
        shown = cli("--output", "json", "effects", "inspect", effect_id, "--db", db)
        return str(shown.json()["data"]["status"])

    declined, stderr = _reconcile_on_a_terminal(db, effect_id, "n", tmp_path)
    assert declined == 3, stderr
    assert "Record `not-applied` for this effect" in stderr and "--approved" in stderr
    listed = cli("--output", "json", "reconcile", "--list", "--db", db).json()["data"]
    assert [e["effectId"] for e in listed["effects"]] == [effect_id]  # nothing recorded
    confirmed, stderr = _reconcile_on_a_terminal(db, effect_id, "y", tmp_path)
    assert confirmed == 0, stderr
    assert (
        cli("--output", "json", "reconcile", "--list", "--db", db).json()["data"]["effects"] == []
    )
    assert status() == "uncertain"


def test_reconcile_without_a_terminal_records_as_given_and_approved_is_accepted(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    # Scripts keep working: no terminal means no question. --approved says so explicitly.
    path = write_workflow(SLOW.format(script="sleep 20", timeout=1))
    db = tmp_path / "r.db"
    (effect,) = cli("--output", "json", "roll", path, "--db", db).json()["data"]["uncertainEffects"]
    done = cli(
        "--output",
        "json",
        "effects",
        "reconcile",
        effect["effectId"],
        "--status",
        "not-applied",
        "--reason",
        "never ran",
        "--approved",
        "--db",
        db,
    )
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["reconciliation"]["status"] == "not_applied"
