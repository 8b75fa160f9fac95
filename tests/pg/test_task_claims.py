"""Task-level claims: one run's parallel batches spread over `agentctl worker` processes on
a real PostgreSQL server, with the recovery rules of a single process."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.pg.backends import rows
from tests.pg.test_workers import _ready, _stop, _worker


def fan_out(ledger: Path, items: int, concurrency: int = 64) -> str:
    """``items`` process steps; each appends its effect id (its idempotency key) to
    ``ledger``, outside the workspace: one line per execution in the world."""
    return f"""
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: fan-out}}
spec:
  runtime: {{maxConcurrency: {concurrency}}}
  policy: {{approval: never, processAllowlist: [sh]}}
  actions:
    append:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo $AGENTCTL_IDEMPOTENCY_KEY >> {ledger}"]
  tasks:
    - id: unit
      uses: action:append
      foreach: {{items: {list(range(items))}, maxItems: {items}}}
"""


def _detach(cli: Any, database: str, ws: Path) -> str:
    queued = cli(
        "--output", "json", "roll", ws / "wf.yaml", "--detach", "--workspace", ws,
        "--db", database,
    )  # fmt: skip
    assert queued.exit_code == 0, queued.stdout + queued.stderr
    return str(queued.json()["data"]["runId"])


def _ledger(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _claimed_by(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["data"]["taskId"] for e in events if e["data"].get("state") == "task.claimed")


def test_a_200_task_fan_out_over_three_workers_runs_every_task_once(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ledger = tmp_path / "ledger.txt"
    (ws / "wf.yaml").write_text(fan_out(ledger, 200))
    workers = [_worker(postgres_url, ws, name) for name in ("w1", "w2", "w3")]
    try:
        for worker in workers:
            _ready(worker)
        run_id = _detach(cli, postgres_url, ws)
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        if waited.exit_code != 0:
            shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url)
            raise AssertionError(waited.stdout + shown.stdout + shown.stderr)
    finally:
        reports = [_stop(worker) for worker in workers]
    lines = _ledger(ledger)
    assert len(lines) == 200 and len(set(lines)) == 200  # every task ran once, no more
    claims = [_claimed_by(report) for report in reports]
    total = sum(claims, Counter())
    assert len(total) == 200 and set(total.values()) == {1}  # each task claimed once
    assert sum(1 for c in claims if c) >= 2  # the batch spread over workers
    shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url).json()["data"]
    assert sorted({e["status"] for e in shown["effects"]}) == ["succeeded"]
    assert len(shown["effects"]) == 200
    assert rows(postgres_url, "SELECT COUNT(*) FROM task_claims") == [(0,)]
    assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0
