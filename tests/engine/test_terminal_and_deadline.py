"""--interactive at a real pseudo-terminal, and the wall-time deadline."""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path
from typing import Any

APPROVAL_WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: interactive}
spec:
  policy: {approval: mutations, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - id: write
      uses: action:save
      with: {path: out/ok.txt, content: approved at the terminal}
"""


def _read_until(fd: int, needle: bytes, limit: float = 30.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + limit
    while needle not in seen:
        assert time.monotonic() < deadline, seen
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_interactive_approval_at_a_terminal(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(APPROVAL_WORKFLOW)
    db = tmp_path / "r.db"
    pid, fd = pty.fork()
    if pid == 0:  # the child: agentctl with a terminal on stdin, stdout and stderr
        os.execv(
            sys.executable,
            [sys.executable, "-m", "agentctl", "roll", str(path), "--db", str(db), "--interactive"],
        )
    try:
        _read_until(fd, b"[y/N]")
        os.write(fd, b"y\n")
        rest = _read_until(fd, b"succeeded")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, rest
    assert (workspace / "out" / "ok.txt").read_text() == "approved at the terminal"
    approvals = cli("--output", "json", "approvals", "list", "--all", "--db", db).json()["data"][
        "approvals"
    ]
    assert [(a["status"], a["resolver"]) for a in approvals] == [("approved", "terminal")]


def test_interactive_without_a_terminal_exits_2_and_creates_nothing(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow(APPROVAL_WORKFLOW)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db, "--interactive")
    assert result.exit_code == 2  # machine output cannot prompt: refused as usage
    human = cli("roll", path, "--db", db, "--interactive")
    # The same answer in human mode: a usage error, not "paused" (no run exists to approve).
    assert human.exit_code == 2, human.stderr
    assert human.stderr.startswith("error: --interactive needs a terminal on stdin and stdout")
    assert "agentctl approvals approve" in human.stderr
    assert not db.exists()
    paused = cli("--output", "json", "roll", path, "--db", db)
    assert paused.exit_code == 3
    run_id = paused.json()["data"]["runId"]
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 3  # still waiting; now the same resume asks for a terminal
    refused = cli("resume", run_id, "--db", db, "--interactive")
    assert refused.exit_code == 2 and "needs a terminal" in refused.stderr
    state = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]["run"]
    assert state["state"] == "paused"


def test_wall_time_deadline_fails_the_run_and_leaves_effect_uncertain(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: deadline}
        spec:
          runtime: {budgets: {maxWallTimeSeconds: 1}}
          policy: {approval: never, processAllowlist: [sleep]}
          actions:
            wait: {kind: builtin.shell.exec, command: sleep, args: ["20"], timeoutSeconds: 60}
          tasks:
            - {id: slow, uses: "action:wait"}
    """)
    db = tmp_path / "r.db"
    started = time.monotonic()
    result = cli("--output", "json", "roll", path, "--db", db)
    assert time.monotonic() - started < 15
    assert result.exit_code == 4, result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "budget.wall_time_exceeded"
    effects = cli("--output", "json", "effects", "list", error["runId"], "--db", db).json()["data"][
        "effects"
    ]
    assert [e["status"] for e in effects] == ["uncertain"]


def test_a_deadline_passed_during_the_last_task_still_fails_the_run(tmp_path: Path) -> None:
    """The last batch commits with the run's completion, but only after the deadline and
    cancel checks that come between batches: the task's transition is kept and the run
    fails for its deadline, as when the check followed a commit of its own."""
    import asyncio
    from datetime import timedelta

    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.executor import ExecutionOptions, RunExecutor
    from agentctl.ids import IdGenerator, SystemClock
    from agentctl.store.engine import open_store

    marker = tmp_path / "the-task-ran"

    class LateOnceTheTaskRan(SystemClock):
        def now(self) -> Any:
            late = timedelta(seconds=120) if marker.exists() else timedelta(0)
            return super().now() + late

    (tmp_path / "wf.yaml").write_text(
        "apiVersion: agentctl.dev/v1\n"
        "kind: Workflow\n"
        "metadata: {name: late}\n"
        "spec:\n"
        "  runtime: {budgets: {maxWallTimeSeconds: 60}}\n"
        "  policy: {approval: never, processAllowlist: [sh]}\n"
        "  actions:\n"
        f'    mark: {{kind: builtin.shell.exec, command: sh, args: ["-c", "touch {marker}"]}}\n'
        "  tasks:\n"
        '    - {id: only, uses: "action:mark"}\n'
    )
    clock = LateOnceTheTaskRan()
    with open_store(str(tmp_path / "r.db")) as store:
        run_id = create_run(
            store, prepare_run(str(tmp_path / "wf.yaml")), clock=clock, ids=IdGenerator(clock)
        )
        options = ExecutionOptions(cancel_poll_seconds=3600)
        outcome = asyncio.run(RunExecutor(store, run_id, clock=clock, options=options).execute())
        with store.read() as conn:
            (task_status,) = conn.exec_driver_sql("SELECT status FROM tasks").first()
    assert marker.exists()
    assert (outcome.state, outcome.error["code"]) == ("failed", "budget.wall_time_exceeded")
    assert task_status == "succeeded"
