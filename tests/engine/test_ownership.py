"""Ownership across real processes: the heartbeat, liveness, takeover and fencing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import start_agentctl

# A step that announces it started (a counter line), then waits for the test's go-ahead.
GATED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: gated}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo ran >> counter; while [ ! -f go ]; do sleep 0.05; done; echo done"]
      timeoutSeconds: 120
  tasks:
    - id: step
      uses: action:work
"""


def _spawn(args: list[str], cwd: Path, **env: str) -> Any:
    """A real agentctl process (forked from a server that imported agentctl once)."""
    return start_agentctl(
        args,
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(path: Path, proc: Any) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the child never reached its marker"
        time.sleep(0.02)


def _run_row(db: Path) -> tuple[str, str, int]:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT id, status, owner_token FROM runs").fetchone()
    conn.close()
    return str(row[0]), str(row[1]), int(row[2])


def _expire_lease(db: Path) -> None:
    """What a lease looks like once its length has passed without a renewal."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET owner_lease_expires_at = '2000-01-01 00:00:00.000000'")
    conn.close()


def _effect_statuses(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status FROM effects ORDER BY requested_at").fetchall()
    conn.close()
    return [str(r[0]) for r in rows]


def test_a_live_owner_keeps_its_run_after_the_lease_length_passes(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(GATED)
    db = tmp_path / "r.db"
    owner = _spawn(["roll", str(path), "--db", str(db)], workspace, AGENTCTL_LEASE_SECONDS="0.4")
    _wait_for(workspace / "counter", owner)
    run_id, _, _ = _run_row(db)
    # The task outlives its lease (as an agent CLI easily does): the owner is alive, so
    # its run is not taken over whatever the lease says.
    _expire_lease(db)
    second = cli("--output", "json", "resume", run_id, "--db", db)
    assert second.exit_code == 3, second.stdout + second.stderr
    assert second.error_json()["error"]["code"] == "run.owned"
    assert _effect_statuses(db) == ["started"]  # the in-flight effect was left alone
    (workspace / "go").touch()
    out, err = owner.communicate(timeout=60)
    assert owner.returncode == 0, out + err
    assert (workspace / "counter").read_text() == "ran\n"
    assert _run_row(db)[1] == "succeeded"


def test_a_stale_owner_is_fenced_out_after_a_takeover(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    """A remote owner (another host name) that stops renewing loses the run; when it wakes
    up, its writes are refused instead of overwriting what the new owner recorded."""
    path = write_workflow(GATED)
    db = tmp_path / "r.db"
    owner = _spawn(
        ["roll", str(path), "--db", str(db)],
        workspace,
        AGENTCTL_LEASE_SECONDS="0.4",
        AGENTCTL_TEST_HOSTNAME="worker-elsewhere",
    )
    _wait_for(workspace / "counter", owner)
    run_id, _, token = _run_row(db)
    os.kill(owner.pid, signal.SIGSTOP)
    try:
        _expire_lease(db)  # the stopped owner's lease ran out
        taken = cli("--output", "json", "resume", run_id, "--db", db)
        assert taken.exit_code == 3, taken.stdout + taken.stderr
        assert [e["operation"] for e in taken.json()["data"]["uncertainEffects"]] == [
            "builtin.shell.exec"
        ]
        assert _run_row(db)[2] == token + 1
        (workspace / "go").touch()
    finally:
        os.kill(owner.pid, signal.SIGCONT)
    out, err = owner.communicate(timeout=60)
    assert owner.returncode == 5, out + err
    assert "no longer owns run" in err and run_id in err
    # What the new owner recorded stands: the effect is uncertain, the run parked.
    assert _effect_statuses(db) == ["uncertain"]
    assert _run_row(db)[1] == "paused"
    # The operator checks the world (the step did run once) and says so; resume continues
    # without running it again.
    effect_id = taken.json()["data"]["uncertainEffects"][0]["effectId"]
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"exitCode": 0, "stdout": "done\n", "stderr": ""}))
    concluded = cli(
        "reconcile",
        effect_id,
        "--status",
        "applied",
        "--reason",
        "the step ran once",
        "--result-file",
        result,
        "--db",
        db,
    )
    assert concluded.exit_code == 0, concluded.stderr
    resumed = cli("resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stdout + resumed.stderr
    assert (workspace / "counter").read_text() == "ran\n"
    assert cli("audit", run_id, "--verify", "--db", db).exit_code == 0


ASKING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
  tasks:
    - id: env
      uses: action:ask
      with: {prompt: "Deploy where?", choices: [staging, production]}
"""


def test_a_cancelled_run_keeps_no_live_parts(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    path = write_workflow(ASKING)
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "roll", path, "--db", db)
    assert paused.exit_code == 3
    data = paused.json()["data"]
    (question,) = data["pendingApprovals"]
    assert cli("cancel", data["runId"], "--db", db).exit_code == 0
    late = cli("--output", "json", "approvals", "answer", question, '"staging"', "--db", db)
    assert late.exit_code == 2, late.stdout + late.stderr
    assert "expired" in late.error_json()["error"]["message"]
    pending = cli("--output", "json", "approvals", "list", "--db", db).json()["data"]
    assert all(item["status"] != "pending" for item in pending["approvals"])
    shown = cli("--output", "json", "inspect", data["runId"], "--db", db).json()["data"]
    states = {task["taskId"]: task["state"] for task in shown["tasks"]}
    assert states == {"env": "cancelled"}


def test_reconcile_refuses_what_contradicts_the_journal(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(GATED)
    (workspace / "go").touch()
    db = tmp_path / "r.db"
    done = cli("--output", "json", "roll", path, "--db", db)
    assert done.exit_code == 0, done.stderr
    with sqlite3.connect(db) as conn:
        (effect_id,) = conn.execute("SELECT id FROM effects").fetchone()
    conn.close()
    refused = cli(
        "--output", "json", "reconcile", effect_id, "--status", "not-applied",
        "--reason", "x", "--db", db,
    )  # fmt: skip
    assert refused.exit_code == 2, refused.stdout + refused.stderr
    assert refused.error_json()["error"]["code"] == "effect.contradicts_record"
    assert _effect_statuses(db) == ["succeeded"]


def test_an_effect_of_a_live_run_cannot_be_reconciled(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(GATED)
    db = tmp_path / "r.db"
    owner = _spawn(["roll", str(path), "--db", str(db)], workspace)
    try:
        _wait_for(workspace / "counter", owner)
        listed = cli("--output", "json", "reconcile", "--list", "--db", db).json()["data"]
        assert listed["effects"] == []  # in flight, not in doubt
        with sqlite3.connect(db) as conn:
            (effect_id,) = conn.execute("SELECT id FROM effects").fetchone()
        conn.close()
        refused = cli(
            "--output", "json", "reconcile", effect_id, "--status", "not-applied",
            "--reason", "x", "--db", db,
        )  # fmt: skip
        assert refused.exit_code == 3, refused.stdout + refused.stderr
        assert refused.error_json()["error"]["code"] == "effect.in_flight"
        (workspace / "go").touch()
        out, err = owner.communicate(timeout=60)
        assert owner.returncode == 0, out + err
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.communicate()


def _dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        lines = list(conn.iterdump())
    conn.close()
    return lines


NEWER_RECORDS = {
    "approvals": "UPDATE approvals SET format_version = 2",
    "effects": "UPDATE effects SET format_version = 2",
    "provider_sessions": "INSERT INTO provider_sessions (run_id, task_id, format_version, "
    "provider, state_json, updated_at) SELECT id, 'x', 2, 'fake', '{}', created_at FROM runs",
    "tool_calls": "INSERT INTO tool_calls (id, format_version, run_id, task_id, tool, status, "
    "arguments_json, created_at) SELECT 'call-1', 2, id, 'x', 't', 'requested', '{}', "
    "created_at FROM runs",
}


@pytest.mark.parametrize("table", sorted(NEWER_RECORDS))
def test_a_newer_record_is_refused_and_nothing_changes(
    cli: Any, tmp_path: Path, table: str
) -> None:
    reference = Path(__file__).resolve().parents[1] / "fixtures" / "reference"
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "incident.txt").write_text("x")
    (ws / "wf.yaml").write_text((reference / "25_2.yaml").read_text())
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert paused.exit_code == 3, paused.stdout + paused.stderr
    run_id = paused.json()["data"]["runId"]
    with sqlite3.connect(db) as conn:
        conn.execute(NEWER_RECORDS[table])
    conn.close()
    before = _dump(db)
    for command in (["resume", run_id], ["inspect", run_id]):
        refused = cli("--output", "json", *command, "--db", db)
        assert refused.exit_code == 5, refused.stdout + refused.stderr
        assert refused.error_json()["error"]["code"] == "store.newer_format"
    assert _dump(db) == before


def _hold_write_lock(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_a_held_write_lock_never_turns_a_dispatched_effect_into_a_failure(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(GATED)
    db = tmp_path / "r.db"
    fast = {"AGENTCTL_SQLITE_BUSY_TIMEOUT_MS": "100", "AGENTCTL_STORE_RETRY_SECONDS": "1"}
    owner = _spawn(["roll", str(path), "--db", str(db)], workspace, **fast)
    try:
        _wait_for(workspace / "counter", owner)
        holder = _hold_write_lock(db)
        (workspace / "go").touch()  # the step finishes while another process holds the lock
        out, err = owner.communicate(timeout=60)
        holder.execute("ROLLBACK")
        holder.close()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.communicate()
    assert owner.returncode == 5, out + err
    assert "could not be recorded" in err and "agentctl resume" in err
    run_id, status, _ = _run_row(db)
    assert status == "running"  # not failed: nothing was concluded
    assert _effect_statuses(db) == ["started"]
    blocked = cli("--output", "json", "resume", run_id, "--db", db)
    assert blocked.exit_code == 3, blocked.stdout + blocked.stderr
    (effect,) = blocked.json()["data"]["uncertainEffects"]
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"exitCode": 0, "stdout": "done\n", "stderr": ""}))
    assert (
        cli(
            "reconcile",
            effect["effectId"],
            "--status",
            "applied",
            "--reason",
            "it ran",
            "--result-file",
            result,
            "--db",
            db,
        ).exit_code  # fmt: skip
        == 0
    )
    finished = cli("resume", run_id, "--db", db)
    assert finished.exit_code == 0, finished.stdout + finished.stderr
    assert (workspace / "counter").read_text() == "ran\n"  # never dispatched again


def test_a_lock_held_shorter_than_the_retry_window_only_delays_the_outcome(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(GATED)
    db = tmp_path / "r.db"
    owner = _spawn(
        ["roll", str(path), "--db", str(db)], workspace, AGENTCTL_SQLITE_BUSY_TIMEOUT_MS="50"
    )
    try:
        _wait_for(workspace / "counter", owner)
        holder = _hold_write_lock(db)
        (workspace / "go").touch()
        time.sleep(0.6)  # longer than the busy timeout: the outcome commit is retried
        holder.execute("ROLLBACK")
        holder.close()
        out, err = owner.communicate(timeout=60)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.communicate()
    assert owner.returncode == 0, out + err
    assert _effect_statuses(db) == ["succeeded"]
