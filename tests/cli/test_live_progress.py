"""The live view of the process that executes a run (`roll`, `resume`), on a real terminal.

It must show the tasks that are running, with their elapsed time, and `done/total` while
the run goes on, not only the tasks that finished.
"""

from __future__ import annotations

import os
import pty
import re
import sys
import textwrap
from pathlib import Path

from tests.cli.test_watch import GATED

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """``agentctl ARGS`` as the child of a pseudo-terminal; the parent reads its screen."""

    def __init__(self, *args: str | Path, cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: agentctl on a terminal
            os.chdir(cwd)
            os.execve(
                sys.executable,
                [sys.executable, "-m", "agentctl", *map(str, args)],
                {**os.environ, "COLUMNS": "160", "LINES": "50"},
            )
        self.screen = ""

    def _read(self) -> bool:
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:  # the terminal closes when the child exits
            return False
        if not chunk:
            return False
        self.screen += ANSI.sub("", chunk.decode("utf-8", "replace"))
        return True

    def read_until(self, pattern: str) -> re.Match[str]:
        """Block on the terminal (no sleeping) until ``pattern`` shows; fail at exit."""
        compiled = re.compile(pattern)
        while True:
            found = compiled.search(self.screen)
            if found is not None:
                return found
            assert self._read(), f"the process ended before {pattern!r} showed:\n{self.screen}"

    def finish(self) -> int:
        while self._read():
            pass
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def test_roll_shows_running_tasks_with_elapsed_time_and_counts(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(textwrap.dedent(GATED))
    terminal = Terminal("roll", ws / "wf.yaml", "--db", tmp_path / "r.db", cwd=ws)
    try:
        # `wait` blocks until the file `go` exists: the view must show it running, its
        # elapsed time counting, while `first` is done and `last` still pending.
        running = terminal.read_until(r"wait\s+running\s+1\s+(\d+\.\d)s")
        terminal.read_until(r"1/3 done, 1 running")
        assert re.search(r"first\s+succeeded\s+1\s+\d+\.\ds", terminal.screen)
        assert re.search(r"last\s+pending", terminal.screen)
        # The elapsed time moves on while the task runs (refreshed, not only on events).
        later = terminal.read_until(
            rf"wait\s+running\s+1\s+(?!{re.escape(running.group(1))}s)\d+\.\ds"
        )
        assert float(later.group(0).split()[-1].rstrip("s")) > float(running.group(1))
    finally:
        (ws / "go").write_text("")
    terminal.read_until(r"3/3 done")
    assert terminal.finish() == 0, terminal.screen
    assert re.search(r"last\s+succeeded", terminal.screen)


ASK_THEN_WAIT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ask-then-wait}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    set: {kind: builtin.assign}
    ask: {kind: builtin.ask}
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "while [ ! -f go ]; do sleep 0.05; done; echo through"]
      timeoutSeconds: 120
  tasks:
    - {id: a, uses: "action:set", with: {n: 1}}
    - {id: b, uses: "action:set", with: {n: 2}}
    - {id: q, uses: "action:ask", needs: [a, b], with: {prompt: "Go?", choices: ["yes"]}}
    - {id: wait, uses: "action:work", needs: [q]}
"""
"""Parks on the question ``q``; resumed, ``wait`` runs until the file ``go`` exists."""


def test_resume_counts_what_the_first_execution_finished(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(textwrap.dedent(ASK_THEN_WAIT))
    db = tmp_path / "r.db"
    parked = Terminal("roll", ws / "wf.yaml", "--db", db, cwd=ws)
    parked.read_until(r"2/4 done, 1 waiting for approval")
    assert parked.finish() == 3, parked.screen
    run_id = re.search(r"(run-[0-9a-f-]+)", parked.screen)
    assert run_id is not None
    listed = Terminal("--output", "json", "approvals", "list", "--db", db, cwd=ws)
    question = listed.read_until(r'"approvalId": "([^"]+)"').group(1)
    assert listed.finish() == 0
    answered = Terminal("approvals", "answer", question, '"yes"', "--db", db, cwd=ws)
    assert answered.finish() == 0, answered.screen
    resumed = Terminal("resume", run_id.group(1), "--db", db, cwd=ws)
    try:
        # Counted from what the first execution finished (a, b), then q, with `wait`
        # shown running while it blocks.
        resumed.read_until(r"3/4 done, 1 running")
        resumed.read_until(r"wait\s+running\s+1\s+\d+\.\ds")
    finally:
        (ws / "go").write_text("")
    resumed.read_until(r"4/4 done")
    assert resumed.finish() == 0, resumed.screen
    assert re.search(r"a\s+succeeded", resumed.screen)
    assert "0/4 done" not in resumed.screen
