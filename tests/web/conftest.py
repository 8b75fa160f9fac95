"""Helpers for dashboard tests: real runs in real SQLite files, parked for a person."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import ForkedProcess, run_agentctl, start_agentctl

RELEASE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: release}
spec:
  policy:
    approval: mutations
    nonInteractive: pause
    writableRoots: [out]
  actions:
    save: {kind: builtin.write}
    set: {kind: builtin.assign}
  tasks:
    - id: prepare
      uses: action:set
      with: {version: "1.2.3"}
    - id: check
      uses: action:set
      needs: [prepare]
      foreach: {items: [lint, unit, docs], as: suite}
      with: {suite: "${{ vars.suite }}"}
    - id: publish
      uses: action:save
      needs: [prepare, check]
      with:
        path: out/release.txt
        content: "released ${{ tasks.prepare.output.output.version }}"
"""
"""Parks at ``publish`` (a write needs approval); approved, it writes an artifact."""

ASKING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
    set: {kind: builtin.assign}
  tasks:
    - id: env
      uses: action:ask
      with: {prompt: "Deploy where?", choices: [staging, production]}
    - id: use
      uses: action:set
      needs: [env]
      with: {target: "${{ tasks.env.output.answer }}"}
"""

UNCERTAIN = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: slow}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "if [ -f marker ]; then echo second; else touch marker; sleep 30; fi"]
      timeoutSeconds: 1
  tasks:
    - id: step
      uses: action:work
"""
"""Its first attempt times out after dispatch: the effect is left uncertain (exit 3)."""


LEDGER = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ledger}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    append: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo a >> ledger.txt"]}
    save: {kind: builtin.write}
  tasks:
    - {id: one, uses: "action:append"}
    - id: two
      uses: action:save
      needs: [one]
      with: {path: out/two.txt, content: "after a"}
"""
"""``one`` appends to ``ledger.txt`` (the outside world an operator checks), then ``two``
writes a file."""

HOLD = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: hold}
spec:
  actions:
    hold: {kind: builtin.pause}
    set: {kind: builtin.assign}
  tasks:
    - {id: build, uses: "action:set", with: {built: true}}
    - id: wait
      uses: action:hold
      needs: [build]
      with: {message: "Check the staging site, then resume"}
    - {id: ship, uses: "action:set", needs: [wait], with: {shipped: true}}
"""
"""Parks at the pause step ``wait`` (exit 3); resumed, ``ship`` runs."""

RETRIED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: retried}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    check:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; [ $n -ge 2 ]"]
    hold: {kind: builtin.pause}
  tasks:
    - {id: gate, uses: "action:check", retry: {maxAttempts: 4, backoffMs: 50}}
    - {id: wait, uses: "action:hold", needs: [gate], with: {message: "look at it"}}
"""
"""``gate`` fails twice and succeeds at its third attempt (50 ms backoffs); then the run
parks at the pause step ``wait`` (exit 3)."""

SHAPES = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: shapes}
spec:
  inputs: {speed: fast}
  actions:
    set: {kind: builtin.assign}
  subworkflows:
    package:
      version: 1.0.0
      inputSchema: {type: object}
      outputSchema: {type: object}
      tasks:
        - {id: build, uses: "action:set", with: {built: true}}
        - {id: sign, uses: "action:set", needs: [build], with: {signed: true}}
  tasks:
    - id: pick
      uses: router
      route:
        select: "${{ inputs.speed }}"
        cases:
          - {equals: fast, tasks: [quick]}
          - {equals: slow, tasks: [thorough]}
    - {id: quick, uses: "action:set", needs: [pick], with: {mode: quick}}
    - {id: thorough, uses: "action:set", needs: [pick], with: {mode: thorough}}
    - id: test
      uses: action:set
      matrix: {axes: {os: [linux, mac], py: ["3.11", "3.12"]}}
      with: {os: "${{ vars.matrix.os }}"}
    - {id: ship, uses: "workflow:package", needs: [test, quick]}
"""
"""A router that skips one branch, a 2x2 matrix and a sub-workflow invocation (succeeds)."""

SHELL_RESULT = {"status": "changed", "changed": True, "exitCode": 0, "stdout": "", "stderr": ""}
"""What ``one``'s command returns; an operator who saw it happen records this result."""


class Runs:
    """Rolls workflows into one database through the CLI, in one workspace."""

    def __init__(self, cli: Any, root: Path) -> None:
        self.cli = cli
        self.workspace = root / "ws"
        self.workspace.mkdir()
        self.db = root / "state" / "runtime.db"

    def roll(self, text: str, name: str, expect: int = 3) -> dict[str, Any]:
        path = self.workspace / f"{name}.yaml"
        path.write_text(textwrap.dedent(text))
        result = self.cli("--output", "json", "roll", path, "--db", self.db)
        assert result.exit_code == expect, result.stderr
        data: dict[str, Any] = result.json()["data"]
        return data

    def park_release_and_question(self) -> tuple[dict[str, Any], str, dict[str, Any], str]:
        """Two parked runs: ``release`` waiting for an approval and ``asking`` for an
        answer; returns each run's document and the id of what it waits for."""
        parked = self.roll(RELEASE, "release")
        (approval,) = parked["pendingApprovals"]
        asked = self.roll(ASKING, "asking")
        (question,) = asked["pendingApprovals"]
        return parked, str(approval), asked, str(question)

    def park_in_a_process(self, text: str, name: str) -> str:
        """A real ``agentctl roll`` process that parks (exit 3); returns the id of what its
        run waits for. For browser tests, whose thread runs Playwright's event loop."""
        path = self.workspace / f"{name}.yaml"
        path.write_text(textwrap.dedent(text))
        rolled = run_agentctl(
            ["--output", "json", "roll", str(path), "--db", str(self.db)],
            cwd=self.workspace,
            timeout=120,
        )
        assert rolled.returncode == 3, rolled.stderr
        (waiting,) = json.loads(rolled.stdout)["data"]["pendingApprovals"]
        return str(waiting)

    def roll_killed(self, text: str, name: str, fault: str) -> str:
        """A real ``agentctl roll`` process SIGKILLed at the fault point ``fault`` (the
        crash suite's ``AGENTCTL_FAULT``); returns the run it left behind."""
        path = self.workspace / f"{name}.yaml"
        path.write_text(textwrap.dedent(text))
        env = {k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}
        killed = run_agentctl(
            ["--output", "json", "roll", str(path), "--db", str(self.db)],
            cwd=self.workspace,
            env={**env, "AGENTCTL_FAULT": fault},
            timeout=120,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        with sqlite3.connect(self.db) as conn:
            (run_id,) = conn.execute("SELECT id FROM runs ORDER BY created_at DESC").fetchone()
        conn.close()
        return str(run_id)

    def inspect(self, run_id: str) -> dict[str, Any]:
        result = self.cli("--output", "json", "inspect", run_id, "--db", self.db)
        assert result.exit_code == 0, result.stderr
        data: dict[str, Any] = result.json()["data"]
        return data


@pytest.fixture(scope="module")
def shared_chromium() -> Iterator[None]:
    """The browser modules' (``usefixtures``): the Chromium their tests share
    (tests/web/browser.py) is closed after the module's last test, so no browser thread
    outlives the module in its worker."""
    from tests.web.browser import close_chromium

    yield
    close_chromium()


@pytest.fixture
def runs(cli: Any, tmp_path: Path) -> Runs:
    return Runs(cli, tmp_path)


@pytest.fixture
def dashboard(runs: Runs) -> Iterator[Any]:
    """A factory of TestClients over the runs' database (the access token is ``tok``)."""
    from starlette.testclient import TestClient

    from agentctl.store.engine import open_store
    from agentctl.web import DashboardConfig, create_app

    opened: list[Any] = []

    def make(*, adopt: bool = False, login: bool = True, **options: Any) -> Any:
        store = open_store(str(runs.db))
        opened.append(store)
        app = create_app(DashboardConfig(store=store, token="tok", adopt=adopt, **options))
        client = TestClient(app, base_url="http://127.0.0.1:8765")
        client.__enter__()
        opened.append(client)
        if login:
            assert client.get("/?token=tok").status_code == 200
        return client

    yield make
    for thing in reversed(opened):
        if hasattr(thing, "app"):
            thing.app.state.adopter.wait()
            thing.__exit__(None, None, None)
        else:
            thing.close()


@pytest.fixture
def ui_server(runs: Runs, tmp_path: Path) -> Iterator[Any]:
    """Starts ``agentctl ui`` in its own process; returns the URL it printed (with token)."""
    started: list[ForkedProcess | subprocess.Popen[str]] = []

    def start() -> str:
        with (tmp_path / "ui.stderr").open("w") as log:
            child = start_agentctl(
                ["--output", "jsonl"]
                + ["ui", "--db", str(runs.db), "--host", "127.0.0.1", "--port", "0"],
                stdout=subprocess.PIPE,
                stderr=log.fileno(),
                stdin=subprocess.DEVNULL,
            )
        started.append(child)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, (tmp_path / "ui.stderr").read_text()
        url = str(json.loads(line)["data"]["url"])
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        return url

    yield start
    for child in started:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        assert child.stdout is not None
        child.stdout.close()
