"""SIGKILL agentctl while a sandboxed child runs: the child dies with it.

Nothing of agentctl gets to clean up after a SIGKILL. The sandbox is built with
``--die-with-parent`` and its own PID namespace, so the kernel ends bubblewrap when
agentctl dies and every process of the namespace when bubblewrap's init does
(docs/isolation.md). The sleeper is found on the host by its unique argument.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.crash.cli import cli, result_json
from tests.engine.sandboxes import require_bwrap, shell_workflow
from tests.forkserver import start_agentctl

pytestmark = pytest.mark.crash


def _sleepers(token: str) -> list[int]:
    """Host pids of the sandboxed ``sleep TOKEN`` (live ones: zombies have no cmdline)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] in ([b"sleep", token.encode()], [b"/usr/bin/sleep", token.encode()]):
            found.append(int(entry.name))
    return found


def _until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_sandboxed_child_dies_with_a_killed_agentctl(tmp_path: Path) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    token = f"{3000 + secrets.randbelow(1000)}.{secrets.randbelow(1000)}"
    (workspace / "wf.yaml").write_text(
        shell_workflow(
            ["-c", f"echo up > out/started; exec sleep {token}"],
            allow="[sh, sleep]",
            timeout=600,
        )
    )
    db = tmp_path / "r.db"
    env = {k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}
    agentctl = start_agentctl(
        ["--output", "json", "roll", "wf.yaml", "--db", str(db)],
        cwd=workspace,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert _until(lambda: (workspace / "out" / "started").exists(), 60), "never started"
        assert _until(lambda: _sleepers(token), 10), "the sandboxed sleeper is not visible"
        agentctl.send_signal(signal.SIGKILL)
        agentctl.wait(timeout=10)
        assert _until(lambda: not _sleepers(token), 10), f"survivors: {_sleepers(token)}"
    finally:
        if agentctl.poll() is None:
            agentctl.kill()
            agentctl.wait()
        for pid in _sleepers(token):
            os.kill(pid, signal.SIGKILL)
    # The run's record says what a crash leaves: the started effect, uncertain on resume.
    resumed = cli(["resume", "--db", str(db), _run_id(db, workspace)], workspace)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert result_json(resumed)["data"]["uncertainEffects"]


def _run_id(db: Path, workspace: Path) -> str:
    listed = result_json(cli(["runs", "list", "--db", str(db)], workspace))
    run_id: str = listed["data"]["runs"][0]["runId"]
    return run_id
