"""A killed owner its parent has not reaped yet (a zombie) is dead (issue 38 item 10).

`kill(pid, 0)` succeeds on a zombie, so a run whose owner was SIGKILLed stayed refused to
`resume` until the parent got round to reaping it. The owner's state in /proc decides.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentctl.store.ownership import owner_alive

SLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: slow}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "touch started; exec sleep 30"]
      timeoutSeconds: 60
  tasks:
    - id: step
      uses: action:work
"""


def _zombie_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().decode().rpartition(")")[2].split()[0]


def test_a_zombie_owner_process_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(f"/proc/{child.pid}/stat", "rb") as handle:
            start = handle.read().decode().rpartition(")")[2].split()[19]
        owner = f"{socket.gethostname()}:{child.pid}:{start}:abcd1234"
        assert owner_alive(owner)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _zombie_state(child.pid) != "Z":  # not reaped: Popen waits only when asked
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not owner_alive(owner)
    finally:
        child.kill()
        child.wait()


def test_resume_takes_over_a_run_whose_killed_owner_is_a_zombie(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "r.db"
    roll = subprocess.Popen(
        [sys.executable, "-m", "agentctl", "roll", str(write_workflow(SLOW)), "--db", str(db)],
        cwd=workspace,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (workspace / "started").exists():
            assert roll.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(roll.pid, signal.SIGKILL)  # the owner and its shell, never reaped here
        while _zombie_state(roll.pid) != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (run,) = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"]
        resumed = cli("--output", "json", "resume", run["runId"], "--db", db)
        assert resumed.exit_code == 3, resumed.stderr
        assert "run.owned" not in resumed.stderr  # refused on main: the zombie looked alive
        # The shell was killed mid-way: its effect is in doubt, which is what resume reports.
        (effect,) = json.loads(resumed.stdout)["data"]["uncertainEffects"]
        assert effect["operation"] == "builtin.shell.exec"
    finally:
        if roll.poll() is None:
            roll.kill()
        roll.wait()
