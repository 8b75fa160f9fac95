"""`agentctl watch RUN` against runs that other real processes execute."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.forkserver import ForkedProcess, start_agentctl

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
      args: ["-c", "while [ ! -f go ]; do sleep 0.05; done; echo through"]
      timeoutSeconds: 120
    set: {kind: builtin.assign}
  tasks:
    - {id: first, uses: "action:set", with: {n: 1}}
    - {id: wait, uses: "action:work", needs: [first]}
    - {id: last, uses: "action:set", needs: [wait], with: {n: 2}}
"""
"""Its `wait` task runs until the test creates the file `go` in the workspace."""

PARKED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: parked}
spec:
  policy: {approval: mutations, nonInteractive: pause, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - {id: publish, uses: "action:save", with: {path: out/x.txt, content: "x"}}
"""


def _agentctl(*args: str | Path, cwd: Path) -> ForkedProcess | subprocess.Popen[str]:
    return start_agentctl(
        [*map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )


def _start_gated(
    tmp_path: Path,
) -> tuple[ForkedProcess | subprocess.Popen[str], str, Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(textwrap.dedent(GATED))
    db = tmp_path / "r.db"
    roll = _agentctl("--output", "jsonl", "roll", ws / "wf.yaml", "--db", db, cwd=ws)
    assert roll.stdout is not None
    first = json.loads(roll.stdout.readline())
    return roll, first["data"]["runId"], ws, db


def _documents(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_jsonl_follows_a_running_run_live_to_its_end(tmp_path: Path) -> None:
    roll, run_id, ws, db = _start_gated(tmp_path)
    watch = _agentctl("--output", "jsonl", "watch", run_id, "--db", db, cwd=ws)
    assert watch.stdout is not None
    seen: list[dict[str, Any]] = []
    # Read what watch streams while the run is still blocked in `wait`…
    while True:
        document = json.loads(watch.stdout.readline())
        seen.append(document)
        if document["data"].get("kind") == "task.succeeded":
            break
    assert not (ws / "go").exists() and roll.poll() is None
    # …then let the run go on and read the rest.
    (ws / "go").write_text("")
    # Read on through the same buffered stream (communicate() would skip what it holds).
    rest = watch.stdout.read()
    assert watch.stderr is not None
    errors = watch.stderr.read()
    watch.stdout.close()
    watch.stderr.close()
    assert watch.wait(timeout=120) == 0, errors
    assert roll.wait(timeout=120) == 0
    roll.communicate()
    seen += _documents(rest)
    *events, result = seen
    assert {e["kind"] for e in events} == {"RunEvent"}
    data = [e["data"] for e in events]
    assert [d["seq"] for d in data] == list(range(1, len(data) + 1))
    times = [datetime.fromisoformat(d["at"]) for d in data]
    assert times == sorted(times)
    kinds = [d["kind"] for d in data]
    assert kinds[0] == "run.created" and kinds[-1] == "run.succeeded"
    finished = [d["taskId"] for d in data if d["kind"] == "task.succeeded"]
    assert finished == ["first", "wait", "last"]
    assert result["kind"] == "WatchResult"
    assert result["data"]["state"] == "succeeded"
    assert result["data"]["tasks"] == {"done": 3, "total": 3}
    assert result["data"]["output"]["wait"]["stdout"] == "through\n"


def test_a_parked_run_exits_3_with_the_next_step(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(textwrap.dedent(PARKED))
    rolled = cli("--output", "json", "roll", ws / "wf.yaml", "--db", tmp_path / "r.db")
    run_id = rolled.json()["data"]["runId"]
    result = cli("watch", run_id, "--db", tmp_path / "r.db")
    assert result.exit_code == 3
    assert f"{run_id} paused (0/1 done, 1 waiting for approval)" in result.stdout
    assert "agentctl approvals list" in result.stdout
    missing = cli("watch", "run-nope", "--db", tmp_path / "r.db")
    assert missing.exit_code == 5 and "unknown run 'run-nope'" in missing.stderr


def test_a_run_whose_process_died_is_reported_not_waited_for(tmp_path: Path) -> None:
    roll, run_id, ws, db = _start_gated(tmp_path)
    assert roll.stdout is not None
    # Wait (blocking read, no sleep) until the run is inside `wait`, then kill its owner.
    while json.loads(roll.stdout.readline())["data"].get("taskId") != "first":
        pass
    roll.send_signal(signal.SIGKILL)
    roll.communicate()
    try:
        watch = _agentctl(
            "--output", "json", "watch", run_id, "--db", db, "--interval", "0.05", cwd=ws
        )
        out, errors = watch.communicate(timeout=120)
    finally:
        (ws / "go").write_text("")  # ends the killed run's shell loop, were it still alive
    assert watch.returncode == 3, errors
    data = json.loads(out)["data"]
    assert data["state"] == "running" and data["note"] == "no live process executes this run"


def test_the_live_view_in_a_terminal(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(textwrap.dedent(PARKED))
    rolled = cli("--output", "json", "roll", ws / "wf.yaml", "--db", tmp_path / "r.db")
    run_id = rolled.json()["data"]["runId"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: agentctl on a terminal
        os.execve(
            sys.executable,
            [sys.executable, "-m", "agentctl", "watch", run_id, "--db", str(tmp_path / "r.db")],
            {**os.environ, "COLUMNS": "200", "LINES": "50"},
        )
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closes when the child exits
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    assert os.waitstatus_to_exitcode(status) == 3, screen
    assert f"{run_id} · parked · paused" in screen
    assert "waiting for approval" in screen and "publish" in screen
    assert "0/1 done, 1 waiting for approval" in screen
