"""`agentctl worker`, `roll --detach` and `runs wait` with real worker processes on a real
PostgreSQL server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.forkserver import start_agentctl
from tests.pg.backends import rows

TAGGED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: tagged}
spec:
  inputs: {tag: none}
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    # Each execution leaves one unique file: counting them counts executions.
    append:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "mkdir -p ledger.d && mktemp ledger.d/run.XXXXXX > /dev/null"]
    save: {kind: builtin.write}
  tasks:
    - {id: mark, uses: "action:append"}
    - id: report
      uses: action:save
      needs: [mark]
      with: {path: "out/${{ inputs.tag }}.txt", content: "${{ inputs.tag }}"}
"""


def _worker(database: str, cwd: Path, name: str, *flags: str, **env: str) -> Any:
    """A real ``agentctl worker`` process (forked from a server that imported agentctl)."""
    return start_agentctl(
        ["--output", "jsonl", "worker", "--name", name]
        + ["--concurrency", "2", "--db", database, *flags],
        cwd=cwd,
        env={**{k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _executions(ws: Path) -> int:
    return len(list((ws / "ledger.d").glob("run.*")))


def _ready(worker: Any) -> None:
    """Read the worker's events until it says it listens (so no run is missed).

    Byte by byte from the pipe itself: a buffered read would take later events with it,
    and `communicate` (which reads the file descriptors directly) would never see them."""
    assert worker.stdout is not None
    fd = worker.stdout.fileno()
    while True:
        line = b""
        while not line.endswith(b"\n"):
            byte = os.read(fd, 1)
            if not byte:
                raise AssertionError(worker.communicate())
            line += byte
        if json.loads(line)["data"].get("state") == "ready":
            return


def _stop(worker: Any) -> list[dict[str, Any]]:
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, out + err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_detached_runs_are_executed_once_each_by_two_workers(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(TAGGED)
    workers = [_worker(postgres_url, ws, name) for name in ("w1", "w2")]
    try:
        for worker in workers:
            _ready(worker)
        tags = [f"t{n}" for n in range(6)]
        run_ids = []
        for tag in tags:
            queued = cli(
                "--output", "json", "roll", ws / "wf.yaml", "--detach",
                "--input", f"tag={tag}", "--workspace", ws, "--db", postgres_url,
            )  # fmt: skip
            assert queued.exit_code == 0, queued.stdout + queued.stderr
            assert queued.json()["data"]["detached"] is True
            run_ids.append(queued.json()["data"]["runId"])
        for run_id in run_ids:
            waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
            if waited.exit_code != 0:  # say why the run ended so, not only that it did
                shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url)
                raise AssertionError(waited.stdout + shown.stdout + shown.stderr)
            assert waited.json()["data"]["state"] == "succeeded"
    finally:
        reports = [_stop(worker) for worker in workers]
    assert _executions(ws) == len(tags)  # every run's effect ran exactly once
    assert sorted(p.name for p in (ws / "out").iterdir()) == [f"{t}.txt" for t in tags]
    executed = [set(r[-1]["data"]["runs"]) for r in reports]
    assert executed[0].isdisjoint(executed[1]) and executed[0] | executed[1] == set(run_ids)
    for run_id in run_ids:
        assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0
    assert rows(postgres_url, "SELECT COUNT(*) FROM runs WHERE owner_id IS NOT NULL") == [(0,)]


def test_a_worker_killed_mid_effect_leaves_it_uncertain_for_the_next_worker(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """A worker leaves the dead worker's run to an operator; one started with
    --recover-interrupted takes it over after the lease, and the effect the dead worker
    dispatched is never run again: it becomes uncertain and the run parks for a person."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(TAGGED)
    queued = cli(
        "--output", "json", "roll", ws / "wf.yaml", "--detach", "--input", "tag=once",
        "--workspace", ws, "--db", postgres_url,
    )  # fmt: skip
    assert queued.exit_code == 0, queued.stdout + queued.stderr
    run_id = queued.json()["data"]["runId"]
    doomed = _worker(
        postgres_url, ws, "doomed", AGENTCTL_FAULT="effect.dispatched", AGENTCTL_LEASE_SECONDS="1"
    )
    doomed.communicate(timeout=120)
    assert doomed.returncode == -signal.SIGKILL
    assert _executions(ws) == 1
    while rows(postgres_url, "SELECT COUNT(*) FROM runs WHERE owner_lease_expires_at < now()") != [
        (1,)
    ]:
        time.sleep(0.05)
    bystander = _worker(postgres_url, ws, "bystander")
    _ready(bystander)  # it looked once at ready; a second look after its idle second
    time.sleep(1.3)
    assert _stop(bystander)[-1]["data"]["runs"] == {}
    assert rows(postgres_url, "SELECT status, owner_id LIKE '%doomed' FROM runs") == [
        ("running", True)
    ]
    survivor = _worker(postgres_url, ws, "survivor", "--recover-interrupted")
    try:
        _ready(survivor)
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 3, waited.stdout + waited.stderr
    finally:
        report = _stop(survivor)
    assert report[-1]["data"]["runs"] == {run_id: "paused"}
    assert _executions(ws) == 1  # nobody guessed: it was not run again
    shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url).json()["data"]
    assert [e["status"] for e in shown["effects"]] == ["uncertain"]
    events = cli("--output", "json", "audit", run_id, "--db", postgres_url).json()["data"]
    taken = [e for e in events["events"] if e["kind"] == "run.taken_over"]
    assert taken and taken[-1]["payload"]["worker"] == "survivor"


def test_detach_needs_postgres_and_creates_nothing_on_sqlite(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(TAGGED)
    db = tmp_path / "r.db"
    refused = cli("--output", "json", "roll", ws / "wf.yaml", "--detach", "--db", db)
    assert refused.exit_code == 2, refused.stdout + refused.stderr
    assert refused.error_json()["error"]["code"] == "worker.needs_postgres"
    assert rows(str(db), "SELECT COUNT(*) FROM runs") == [(0,)]
    worker = cli("--output", "json", "worker", "--db", db)
    assert worker.exit_code == 2 and "PostgreSQL" in worker.stderr
    assert "--detach" not in worker.error_json()["error"]["hint"]  # worker has no --detach


def test_runs_wait_reports_the_state_as_its_exit_code_on_sqlite_too(
    cli: Any, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ask.yaml").write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: asking}\n"
        "spec:\n  actions:\n    ask: {kind: builtin.ask}\n  tasks:\n"
        "    - id: env\n      uses: action:ask\n"
        "      with: {prompt: 'Deploy where?', choices: [staging, production]}\n"
    )
    db = tmp_path / "r.db"
    parked = cli("--output", "json", "roll", ws / "ask.yaml", "--db", db)
    run_id = parked.json()["data"]["runId"]
    waited = cli("--output", "json", "runs", "wait", run_id, "--db", db)
    assert waited.exit_code == 3 and waited.json()["data"]["state"] == "paused"
    assert cli("cancel", run_id, "--db", db).exit_code == 0
    assert cli("runs", "wait", run_id, "--db", db).exit_code == 130
    unknown = cli("--output", "json", "runs", "wait", "run-nope", "--db", db)
    assert unknown.exit_code == 5 and "run-nope" in unknown.stderr


def test_a_worker_waits_out_a_held_write_lock_instead_of_dying(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    import psycopg

    from agentctl.store.locks import STORE_KEY as WRITE_LOCK_KEY

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(TAGGED)
    # A run waits for a worker (a worker only takes the write lock when it has seen
    # something to claim), then another program holds the lock.
    queued = cli(
        "--output", "json", "roll", ws / "wf.yaml", "--detach", "--input", "tag=late",
        "--workspace", ws, "--db", postgres_url,
    )  # fmt: skip
    run_id = queued.json()["data"]["runId"]
    holder = psycopg.connect(postgres_url)
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
    worker = _worker(postgres_url, ws, "patient", AGENTCTL_SQLITE_BUSY_TIMEOUT_MS="100")
    try:
        _ready(worker)
        assert worker.stdout is not None
        event = json.loads(worker.stdout.readline())["data"]
        assert event["state"] == "waiting" and event["code"] == "store.locked"
        holder.commit()  # the other writer is done
        assert cli("runs", "wait", run_id, "--db", postgres_url).exit_code == 0
    finally:
        holder.close()
        _stop(worker)
    assert _executions(ws) == 1
