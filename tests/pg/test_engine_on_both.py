"""The engine's shared behaviour on both backends: each test runs on a SQLite file and on a
fresh database of a real PostgreSQL server (the ``database`` fixture), through the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import start_agentctl
from tests.pg.backends import execute, rows

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "reference"

LEDGER = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ledger}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    append-a: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo a >> ledger.txt"]}
    append-b: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo b >> ledger.txt"]}
    save: {kind: builtin.write}
  tasks:
    - {id: one, uses: "action:append-a"}
    - id: two
      uses: action:save
      needs: [one]
      with: {path: out/two.txt, content: "after a"}
    - {id: three, uses: "action:append-b", needs: [two]}
"""

PIPELINE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: pipeline}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    expensive:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo run >> counter.txt; echo built"]
    gate: {kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}
    set: {kind: builtin.assign}
  tasks:
    - {id: build, uses: "action:expensive"}
    - {id: check, uses: "action:gate", needs: [build]}
    - id: publish
      uses: action:set
      needs: [build, check]
      with: {artifact: "${{ tasks.build.output.stdout }}"}
"""

ROLLOUT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: rollout}
spec:
  policy: {approval: never, writableRoots: [conf]}
  actions:
    put: {kind: builtin.write}
    check: {kind: builtin.assert}
  tasks:
    - id: deploy
      uses: action:put
      with: {path: conf/app.conf, content: "version=2\\n"}
      compensate:
        uses: action:put
        with:
          path: conf/app.conf
          content: "${{ tasks.deploy.output.before }}"
    - id: verify
      uses: action:check
      needs: [deploy]
      with: {that: false, message: health check failed}
"""

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
        ["--output", "json", *args],
        cwd=cwd,
        env={**{k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(path: Path, proc: Any) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the child never reached its marker"
        time.sleep(0.02)


def test_roll_parks_for_approval_then_resumes_and_the_audit_verifies(
    cli: Any, database: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "incident.txt").write_text("db-2: disk full\n")
    shutil.copy(REFERENCE / "25_2.yaml", ws / "wf.yaml")
    paused = cli("--output", "json", "roll", ws / "wf.yaml", "--db", database)
    assert paused.exit_code == 3, paused.stdout + paused.stderr
    data = paused.json()["data"]
    (approval,) = data["pendingApprovals"]
    listed = cli("--output", "json", "approvals", "list", "--db", database).json()["data"]
    assert [a["approvalId"] for a in listed["approvals"]] == [approval]
    assert cli("approvals", "approve", approval, "--reason", "ok", "--db", database).exit_code == 0
    resumed = cli("--output", "json", "resume", data["runId"], "--db", database)
    assert resumed.exit_code == 0, resumed.stdout + resumed.stderr
    assert (ws / "out" / "escalation.txt").read_text() == "disk full on db-2"
    inspection = cli("--output", "json", "inspect", data["runId"], "--db", database).json()
    effects = inspection["data"]["effects"]
    assert [e["operation"] for e in effects] == [
        "scripted",
        "tool.read_note",
        "scripted",
        "builtin.write",
    ]
    assert all(e["confirmed"] is True for e in effects)
    assert inspection["data"]["audit"]["verified"] is True
    assert cli("audit", data["runId"], "--verify", "--db", database).exit_code == 0
    conflicting = cli("approvals", "reject", approval, "--reason", "no", "--db", database)
    assert conflicting.exit_code == 2


def test_a_kill_after_dispatch_leaves_an_uncertain_effect_that_reconcile_settles(
    cli: Any, database: str, tmp_path: Path
) -> None:
    """The crash suite's rule on one fault point: an effect dispatched but not confirmed is
    never run again by itself; the operator's conclusion lets the run finish."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(LEDGER)
    killed = _spawn(["roll", "wf.yaml", "--db", database], ws, AGENTCTL_FAULT="effect.dispatched")
    killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    (run_id,) = (str(r[0]) for r in rows(database, "SELECT id FROM runs"))
    blocked = cli("--output", "json", "resume", run_id, "--db", database)
    assert blocked.exit_code == 3, blocked.stdout + blocked.stderr
    (effect,) = blocked.json()["data"]["uncertainEffects"]
    assert effect["operation"] == "builtin.shell.exec"
    assert (ws / "ledger.txt").read_text() == "a\n"  # it ran once; nobody ran it again
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"exitCode": 0, "stdout": "", "stderr": ""}))
    concluded = cli(
        "reconcile",
        effect["effectId"],
        "--status",
        "applied",
        "--reason",
        "the ledger shows it",
        "--result-file",
        result,
        "--db",
        database,
    )
    assert concluded.exit_code == 0, concluded.stdout + concluded.stderr
    # The conclusion settled the effect's worst case in the same transaction: counted as used.
    inspection = cli("--output", "json", "inspect", run_id, "--db", database).json()["data"]
    ledger = {row["resource"]: row for row in inspection["budget"]}["processOutputBytes"]
    assert ledger["reserved"] == 0 and ledger["used"] > 0
    finished = cli("--output", "json", "resume", run_id, "--db", database)
    assert finished.exit_code == 0, finished.stdout + finished.stderr
    assert (ws / "ledger.txt").read_text() == "a\nb\n"
    assert (ws / "out" / "two.txt").read_text() == "after a"
    assert cli("audit", run_id, "--verify", "--db", database).exit_code == 0


def test_retry_reuses_the_expensive_task(cli: Any, database: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(PIPELINE)
    failed = cli("--output", "json", "roll", ws / "wf.yaml", "--db", database)
    assert failed.exit_code == 4, failed.stdout + failed.stderr
    source = failed.error_json()["error"]["runId"]
    (ws / "ready").write_text("")
    retried = cli("--output", "json", "retry", ws / "wf.yaml", source, "--failed", "--db", database)
    assert retried.exit_code == 0, retried.stdout + retried.stderr
    data = retried.json()["data"]
    assert data["output"]["publish"]["output"]["artifact"] == "built\n"
    assert (ws / "counter.txt").read_text() == "run\n"  # reused, not run again
    inspection = cli("--output", "json", "inspect", data["runId"], "--db", database).json()
    dispositions = {t["taskId"]: t["disposition"] for t in inspection["data"]["tasks"]}
    assert dispositions["build"] == "reused"


def test_a_failed_rollout_is_compensated_once(cli: Any, database: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "conf").mkdir(parents=True)
    (ws / "conf" / "app.conf").write_text("version=1\n")
    (ws / "wf.yaml").write_text(ROLLOUT)
    failed = cli("--output", "json", "roll", ws / "wf.yaml", "--db", database)
    assert failed.exit_code == 4, failed.stdout + failed.stderr
    source = failed.error_json()["error"]["runId"]
    done = cli("--output", "json", "compensate", source, "--db", database)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert (ws / "conf" / "app.conf").read_text() == "version=1\n"
    again = cli("--output", "json", "compensate", source, "--plan", "--db", database)
    assert [s["action"] for s in again.json()["data"]["steps"]] == ["skip"]
    assert cli("audit", source, "--verify", "--db", database).exit_code == 0


def test_artifacts_are_listed_verified_and_exported(
    cli: Any, database: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(LEDGER)
    rolled = cli("--output", "json", "roll", ws / "wf.yaml", "--db", database)
    assert rolled.exit_code == 0, rolled.stdout + rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    listed = cli("--output", "json", "artifacts", "list", "--run", run_id, "--db", database)
    assert listed.exit_code == 0, listed.stdout + listed.stderr
    (artifact,) = listed.json()["data"]["artifacts"]
    assert artifact["taskId"] == "two"
    verified = cli("--output", "json", "artifacts", "verify", "--all", "--db", database)
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    target = Path.cwd() / "exported.txt"
    exported = cli("artifacts", "export", artifact["digest"], target, "--db", database)
    assert exported.exit_code == 0, exported.stdout + exported.stderr
    assert target.read_text() == "after a"


def test_a_stale_owner_is_fenced_out_after_a_takeover(
    cli: Any, database: str, tmp_path: Path
) -> None:
    """A remote owner that stops renewing loses the run; when it wakes up its writes are
    refused by the fencing token instead of overwriting what the new owner recorded."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(GATED)
    owner = _spawn(
        ["roll", "wf.yaml", "--db", database],
        ws,
        AGENTCTL_LEASE_SECONDS="0.4",
        AGENTCTL_TEST_HOSTNAME="worker-elsewhere",
    )
    _wait_for(ws / "counter", owner)
    ((run_id, token),) = rows(database, "SELECT id, owner_token FROM runs")
    os.kill(owner.pid, signal.SIGSTOP)
    try:
        execute(database, "UPDATE runs SET owner_lease_expires_at = '2000-01-01 00:00:00.000000'")
        taken = cli("--output", "json", "resume", run_id, "--db", database)
        assert taken.exit_code == 3, taken.stdout + taken.stderr
        (uncertain,) = taken.json()["data"]["uncertainEffects"]
        assert rows(database, "SELECT owner_token FROM runs") == [(token + 1,)]
        (ws / "go").touch()
    finally:
        os.kill(owner.pid, signal.SIGCONT)
    out, err = owner.communicate(timeout=60)
    assert owner.returncode == 5, out + err
    assert "no longer owns run" in err and run_id in err
    assert rows(database, "SELECT status FROM effects") == [("uncertain",)]
    assert rows(database, "SELECT status FROM runs") == [("paused",)]
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"exitCode": 0, "stdout": "done\n", "stderr": ""}))
    concluded = cli(
        "reconcile",
        uncertain["effectId"],
        "--status",
        "applied",
        "--reason",
        "the step ran once",
        "--result-file",
        result,
        "--db",
        database,
    )
    assert concluded.exit_code == 0, concluded.stderr
    assert cli("resume", run_id, "--db", database).exit_code == 0
    assert (ws / "counter").read_text() == "ran\n"
    assert cli("audit", run_id, "--verify", "--db", database).exit_code == 0


FOREACH = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: parallel-foreach}
spec:
  runtime: {maxConcurrency: 4}
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    mark: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo ${0} >> ledger.txt", "x"]}
    set: {kind: builtin.assign}
  tasks:
    - id: fan
      uses: action:mark
      foreach: {items: [p, q, r, s, t, u], as: tag}
    - id: join
      uses: action:set
      needs: [fan]
      with: {count: "${{ tasks.fan.output.items }}"}
"""


def test_parallel_batches_then_replay_fork_repair_cancel_and_checks(
    cli: Any, database: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(FOREACH)
    first = cli("--output", "json", "roll", ws / "wf.yaml", "--db", database)
    assert first.exit_code == 0, first.stdout + first.stderr
    run_id = first.json()["data"]["runId"]
    assert len((ws / "ledger.txt").read_text().splitlines()) == 6
    replayed = cli("--output", "json", "replay", run_id, "--db", database)
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    assert replayed.json()["data"]["output"] == first.json()["data"]["output"]
    assert len((ws / "ledger.txt").read_text().splitlines()) == 6  # replay ran nothing
    repaired = cli("--output", "json", "repair", ws / "wf.yaml", run_id, "--db", database)
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
    assert len((ws / "ledger.txt").read_text().splitlines()) == 6  # all still compatible
    forked = cli("--output", "json", "fork", run_id, "--reason", "again", "--db", database)
    assert forked.exit_code == 0, forked.stdout + forked.stderr
    assert len((ws / "ledger.txt").read_text().splitlines()) == 12
    listed = cli("--output", "json", "runs", "list", "--db", database).json()["data"]["runs"]
    assert sorted(r["state"] for r in listed) == ["succeeded"] * 4
    for run in listed:
        assert cli("audit", run["runId"], "--verify", "--db", database).exit_code == 0
    checked = cli("--output", "json", "db", "check", "--db", database)
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    # A parked run is cancelled at once; inspect shows it with its timestamps.
    (ws / "ask.yaml").write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: asking}\n"
        "spec:\n  actions:\n    ask: {kind: builtin.ask}\n  tasks:\n"
        "    - id: env\n      uses: action:ask\n"
        "      with: {prompt: 'Deploy where?', choices: [staging, production]}\n"
    )
    parked = cli("--output", "json", "roll", ws / "ask.yaml", "--db", database)
    assert parked.exit_code == 3, parked.stdout + parked.stderr
    parked_id = parked.json()["data"]["runId"]
    assert cli("cancel", parked_id, "--db", database).exit_code == 0
    shown = cli("--output", "json", "inspect", parked_id, "--db", database).json()["data"]
    assert shown["run"]["state"] == "cancelled"
    # The same text on both backends: UTC wall time, no zone (PostgreSQL's aware values
    # are converted back by the store's timestamp codec).
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}", shown["run"]["createdAt"])
    dry = cli("--output", "json", "gc", "--older-than-days", "0", "--dry-run", "--db", database)
    assert dry.exit_code == 0, dry.stdout + dry.stderr


def test_a_host_with_another_artifact_root_refuses_to_reuse_what_it_cannot_read(
    cli: Any, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The artifact root must be shared by every process of a PostgreSQL database; one that
    is not sees the rows but not the bytes, and says so instead of losing them."""
    ws = tmp_path / "ws"
    (ws / "conf").mkdir(parents=True)
    (ws / "conf" / "app.conf").write_text("version=1\n")
    (ws / "wf.yaml").write_text(ROLLOUT)
    failed = cli("--output", "json", "roll", ws / "wf.yaml", "--db", postgres_url)
    assert failed.exit_code == 4, failed.stdout + failed.stderr
    source = failed.error_json()["error"]["runId"]
    monkeypatch.setenv("AGENTCTL_ARTIFACT_ROOT", str(tmp_path / "elsewhere"))
    verified = cli("--output", "json", "artifacts", "verify", "--all", "--db", postgres_url)
    assert verified.exit_code == 5, verified.stdout + verified.stderr
    assert "missing" in verified.stdout + verified.stderr
    retried = cli(
        "--output", "json", "retry", ws / "wf.yaml", source, "--failed", "--db", postgres_url
    )
    assert retried.exit_code == 3, retried.stdout + retried.stderr
    assert "cannot be reused" in retried.stdout + retried.stderr
    assert (ws / "conf" / "app.conf").read_text() == "version=2\n"
