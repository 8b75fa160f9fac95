"""Real `agentctl daemon` processes: SIGKILLed between a slot's record and its run, two
daemons firing the same slots at once, SIGTERM. Each slot's run executes exactly once
(the shell step appends its tag to a ledger file, counted afterwards)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentctl.scheduling.daemon import FAULT_POINTS
from tests.forkserver import start_agentctl

pytestmark = pytest.mark.crash

LEDGER = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ledger}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    append: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo slot >> ledger.txt"]}
  tasks:
    - {id: append, uses: "action:append"}
"""


def _agentctl(*args: str | Path, fault: str | None = None) -> Any:
    """A real daemon or command process (forked from a server that imported agentctl)."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}
    if fault:
        env["AGENTCTL_FAULT"] = fault
    return start_agentctl(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run(*args: str | Path, fault: str | None = None) -> tuple[int, str, str]:
    child = _agentctl(*args, fault=fault)
    out, err = child.communicate(timeout=120)
    return child.returncode, out, err


# What these tests kill and restart are daemon processes; setting up and reading back the
# schedule, its firings and its runs happen in-process (the same commands, without a Python
# start-up each: the subprocesses were most of this module's time).
_CLI: Any = None


def _json(*args: str | Path) -> Any:
    result = _CLI("--output", "json", *args)
    assert result.exit_code == 0, result.stderr
    return result.json()["data"]


def _daemon(*args: str | Path) -> Any:
    """A restarted daemon is a new process, as after a real crash."""
    code, out, err = _run("--output", "json", "daemon", *args)
    assert code == 0, err
    return json.loads(out)["data"]


@pytest.fixture(autouse=True)
def _in_process(cli: Any) -> Any:
    global _CLI
    _CLI = cli
    yield
    _CLI = None


@pytest.fixture
def project(database: str) -> str:
    """A schedule in a SQLite file, or in a PostgreSQL database: the daemon's guarantees
    hold on both."""
    flows = Path("workflows")
    flows.mkdir()
    (flows / "ledger.yaml").write_text(textwrap.dedent(LEDGER))
    db = database
    _json(
        "schedule", "add", "hourly", "ledger", "--every", "1h",
        "--overlap", "allow", "--start", "2026-05-01T00:00:00Z", "--db", db,
    )  # fmt: skip
    return db


def _ledger() -> list[str]:
    path = Path("workflows") / "ledger.txt"
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_daemon_killed_between_slot_record_and_run_start(project: str, point: str) -> None:
    db = project
    now = "2026-05-01T01:00:00Z"
    code, _, _ = _run("daemon", "--once", "--now", now, "--db", db, fault=point)
    assert code == -signal.SIGKILL
    assert _ledger() == []  # nothing executed before the kill
    (firing,) = _json("schedule", "show", "hourly", "--db", db)["firings"]
    if point == "schedule.slot_recorded":
        assert firing["state"] == "recorded" and firing["runId"] is None
    else:
        assert firing["state"] == "started" and firing["runId"]
        (run,) = _json("runs", "list", "--db", db)["runs"]
        assert run["state"] == "running"
    # Restarted: the interrupted slot's run is created or started, once.
    report = _daemon("--once", "--now", now, "--db", db)
    assert [r["state"] for r in report["runs"]] == ["succeeded"]
    again = _daemon("--once", "--now", now, "--db", db)
    assert again["fired"] == [] and again["started"] == [] and again["runs"] == []
    assert _ledger() == ["slot"]
    (firing,) = _json("schedule", "show", "hourly", "--db", db)["firings"]
    (run,) = _json("runs", "list", "--db", db)["runs"]
    assert firing["state"] == "started" and firing["runId"] == run["runId"]
    assert run["state"] == "succeeded"


@pytest.mark.slow
def test_two_daemons_fire_each_slot_once(project: str) -> None:
    db = project
    for hour in (1, 2, 3):
        now = f"2026-05-01T0{hour}:00:00Z"
        daemons = [_agentctl("--output", "json", "daemon", "--once", "--now", now, "--db", db)]
        daemons.append(_agentctl("--output", "json", "daemon", "--once", "--now", now, "--db", db))
        results = [d.communicate(timeout=120) for d in daemons]
        assert [d.returncode for d in daemons] == [0, 0], [err for _, err in results]
        fired = [f for out, _ in results for f in json.loads(out)["data"]["fired"]]
        assert len(fired) == 1
    assert _ledger() == ["slot", "slot", "slot"]
    firings = _json("schedule", "show", "hourly", "--db", db)["firings"]
    assert sorted(f["slot"][11:13] for f in firings) == ["01", "02", "03"]
    runs = _json("runs", "list", "--db", db)["runs"]
    assert len(runs) == 3 and {r["state"] for r in runs} == {"succeeded"}
    assert {f["runId"] for f in firings} == {r["runId"] for r in runs}


def test_sigterm_stops_the_daemon_cleanly(project: str) -> None:
    daemon = _agentctl("--output", "jsonl", "daemon", "--poll", "1h", "--db", project)
    assert daemon.stdout is not None
    first = json.loads(daemon.stdout.readline())  # blocks until the daemon is up
    assert first["kind"] == "DaemonStarted"
    daemon.send_signal(signal.SIGTERM)
    rest, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert json.loads(rest.splitlines()[-1])["kind"] == "DaemonStopped"


def test_monitor_change_survives_a_kill_before_its_run(database: str) -> None:
    flows = Path("workflows")
    flows.mkdir()
    (flows / "ledger.yaml").write_text(textwrap.dedent(LEDGER))
    watched = Path("watched.md")
    watched.write_text("one\n")
    db = database
    _json(
        "monitor", "add", "changed", "ledger", "--watch-files", "watched.md", "--every", "1m",
        "--start", "2026-05-01T00:00:00Z", "--db", db,
    )  # fmt: skip
    assert _run("daemon", "--once", "--now", "2026-05-01T00:01:00Z", "--db", db)[0] == 0
    watched.write_text("two\n")
    now = "2026-05-01T00:02:00Z"
    killed = _run("daemon", "--once", "--now", now, "--db", db, fault="schedule.slot_recorded")
    assert killed[0] == -signal.SIGKILL and _ledger() == []
    report = _daemon("--once", "--now", now, "--db", db)
    assert [r["state"] for r in report["runs"]] == ["succeeded"]
    assert _daemon("--once", "--now", now, "--db", db)["runs"] == []
    assert _ledger() == ["slot"]
    (run,) = _json("runs", "list", "--db", db)["runs"]
    inputs = _json("inspect", run["runId"], "--db", db)["run"]["inputs"]
    assert inputs["observedAt"] == now and inputs["current"]["files"] == ["watched.md"]
