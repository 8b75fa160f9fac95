"""A parked run resumes on whichever worker sees its answer (real worker processes on a real
PostgreSQL server): the adoption rule the daemon uses, one home in store/adoption.py."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.pg.backends import execute, rows
from tests.pg.test_workers import _executions, _ready, _stop, _worker


class Watched:
    """A worker process whose events are read by a thread, so a test can wait for one
    event from any of several workers."""

    def __init__(self, process: subprocess.Popen[str], events: queue.Queue[dict[str, Any]]):
        self.process = process
        self.lines: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._read, args=(events,), daemon=True)
        self._thread.start()

    def _read(self, events: queue.Queue[dict[str, Any]]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip():
                event = json.loads(line)
                self.lines.append(event)
                events.put(event["data"])

    def stop(self) -> list[dict[str, Any]]:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        self._thread.join(timeout=60)
        assert self.process.stdout is not None and self.process.stderr is not None
        errors = self.process.stderr.read()
        self.process.stdout.close()
        self.process.stderr.close()
        assert self.process.returncode == 0, (self.lines, errors)
        return self.lines


def _until(events: queue.Queue[dict[str, Any]], run_id: str, states: set[str]) -> dict[str, Any]:
    while True:
        event = events.get(timeout=120)
        if event.get("runId") == run_id and event.get("state") in states:
            return event


ASKING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    ask: {kind: builtin.ask}
    append:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "mkdir -p ledger.d && mktemp ledger.d/run.XXXXXX > /dev/null"]
  tasks:
    - id: where
      uses: action:ask
      with: {prompt: 'Deploy where?', choices: [staging, production]}
    - {id: deploy, uses: "action:append", needs: [where]}
"""


def _park(cli: Any, database: str, ws: Path) -> tuple[str, str]:
    """A detached run executed by a worker until it parks on its question; (run, question)."""
    queued = cli(
        "--output", "json", "roll", ws / "ask.yaml", "--detach", "--workspace", ws,
        "--db", database,
    )  # fmt: skip
    assert queued.exit_code == 0, queued.stdout + queued.stderr
    run_id = queued.json()["data"]["runId"]
    parked = cli("--output", "json", "runs", "wait", run_id, "--db", database)
    assert parked.exit_code == 3, parked.stdout + parked.stderr
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", database)
    (question,) = [a["approvalId"] for a in listed.json()["data"]["approvals"]]
    return run_id, question


def test_an_answered_parked_run_is_resumed_by_a_worker(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ask.yaml").write_text(ASKING)
    processes = [_worker(postgres_url, ws, name) for name in ("w1", "w2")]
    for process in processes:
        _ready(process)
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    workers = [Watched(process, events) for process in processes]
    try:
        run_id, question = _park(cli, postgres_url, ws)
        assert _executions(ws) == 0
        answered = cli("approvals", "answer", question, '"staging"', "--db", postgres_url)
        assert answered.exit_code == 0, answered.stdout + answered.stderr
        adopted_by = _until(events, run_id, {"adopted"})["worker"]
        _until(events, run_id, {"succeeded", "failed", "paused", "error"})
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 0, waited.stdout + waited.stderr
    finally:
        reports = [worker.stop() for worker in workers]
    assert _executions(ws) == 1
    events = cli("--output", "json", "audit", run_id, "--db", postgres_url).json()["data"]
    adopted = [e for e in events["events"] if e["kind"] == "run.adopted"]
    assert len(adopted) == 1
    finals = {r[-1]["data"]["worker"]: r[-1]["data"]["runs"] for r in reports}
    assert finals[adopted_by][run_id] == "succeeded"  # the adopter reports how it ended
    assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0


def test_a_parked_run_whose_owner_is_alive_is_not_adopted(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """An owner recorded on this host and still running keeps the run; once it is gone the
    run is adopted."""
    from agentctl.store.ownership import new_owner_id

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ask.yaml").write_text(ASKING)
    worker = _worker(postgres_url, ws, "w1")
    try:
        _ready(worker)
        run_id, question = _park(cli, postgres_url, ws)
    finally:
        _stop(worker)
    # This test process plays a live owner that has not let go of the parked run.
    execute(postgres_url, "UPDATE runs SET owner_id = ? WHERE id = ?", (new_owner_id(), run_id))
    assert cli("approvals", "answer", question, '"staging"', "--db", postgres_url).exit_code == 0
    once = cli("--output", "json", "daemon", "--once", "--db", postgres_url)
    assert once.exit_code == 0 and run_id not in once.stdout, once.stdout + once.stderr
    assert rows(postgres_url, "SELECT status FROM runs WHERE id = ?", (run_id,)) == [("paused",)]
    process = _worker(postgres_url, ws, "w2")
    _ready(process)
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    worker = Watched(process, events)
    try:
        # The owner goes away (a pid that exists nowhere): now the answer is acted on.
        gone = f"{os.uname().nodename}:999999999:1:dead"
        execute(postgres_url, "UPDATE runs SET owner_id = ? WHERE id = ?", (gone, run_id))
        execute(postgres_url, "SELECT pg_notify('agentctl_runs', ?)", (run_id,))
        _until(events, run_id, {"adopted"})
        # Adopting is taking ownership; the run reads `paused` until the worker's executor
        # resumes it, so a `runs wait` right after the event may still see the park (exit 3).
        # The worker's own outcome event is the moment to look.
        _until(events, run_id, {"succeeded", "failed", "paused", "error"})
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 0, waited.stdout + waited.stderr
    finally:
        report = worker.stop()
    assert report[-1]["data"]["runs"] == {run_id: "succeeded"}
    assert _executions(ws) == 1
