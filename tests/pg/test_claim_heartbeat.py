"""A worker's one heartbeat for all of its claims, on a real PostgreSQL server: one
statement per period renews every live claim's lease (each claim used to read its run
and update its row: two statements per claim per period), and a claim that is lost or
whose run is cancelled still stops its task, without stopping the others
(engine/run/claim_heartbeat.py). Counts, never CPU times."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.worker import Worker, detach_run, wait_for_run
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import ownership
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import open_store
from agentctl.store.transitions import guarded_update
from tests.pg.backends import execute, rows
from tests.pg.test_statement_counts import _sent

#: The lease the tests run with: a beat every quarter of it.
LEASE = 2.0
PERIOD = min(LEASE / 4, 1.0)


def _sleepers(tmp_path: Path, items: int, seconds: float) -> str:
    """A workflow of ``items`` process steps that each sleep ``seconds``; its file."""
    (tmp_path / "wf.yaml").write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: sleepers}\nspec:\n"
        f"  runtime: {{maxConcurrency: {items}}}\n"
        "  policy: {approval: never, processAllowlist: [sleep]}\n"
        f"  actions:\n    wait: {{kind: builtin.shell.exec, command: sleep, args: ['{seconds}']}}\n"
        "  tasks:\n    - id: unit\n      uses: action:wait\n"
        f"      foreach: {{items: {list(range(items))}, maxItems: {items}}}\n"
    )
    return str(tmp_path / "wf.yaml")


def test_one_statement_per_period_renews_every_live_claim_of_a_worker(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three claimed tasks of 3 s on one worker, a beat every 0.5 s: each beat is one
    statement that renews all three leases (was: a read of the run and an update of the
    claim, for each claim: about 36 statements here), and no claim is read on its own."""
    monkeypatch.setenv("AGENTCTL_LEASE_SECONDS", str(LEASE))
    store = open_store(postgres_url)
    clock = SystemClock()
    run_id = create_run(
        store,
        prepare_run(_sleepers(tmp_path, 3, 3), workspace=str(tmp_path)),
        clock=clock,
        ids=IdGenerator(clock),
    )
    detach_run(store, run_id)
    moments: dict[str, list[float]] = {"task.claimed": [], "task.done": []}

    def events(_kind: str, data: dict[str, Any]) -> None:
        if data.get("state") in moments:
            moments[str(data["state"])].append(time.monotonic())

    worker = Worker(store, name="w1", concurrency=3, clock=clock, events=events)
    leases: list[tuple[Any, ...]] = []

    async def main() -> str:
        serving = asyncio.create_task(worker.serve())
        try:
            while len(moments["task.claimed"]) < 3:
                await asyncio.sleep(0.05)
            await asyncio.sleep(3 * PERIOD)
            # Every claim renewed since it was taken: its lease runs past its first one.
            leases.extend(
                await asyncio.to_thread(
                    rows,
                    postgres_url,
                    "SELECT task_id, lease_expires_at > started_at + interval '2 seconds' "
                    "FROM task_claims WHERE run_id = ? AND state = 'claimed'",
                    (run_id,),
                )
            )
            return await wait_for_run(store, run_id)
        finally:
            worker.stop()
            await serving

    try:
        with _sent(monkeypatch) as sent:
            assert asyncio.run(main()) == "succeeded"
    finally:
        store.close()
    assert len(leases) == 3 and all(renewed for _, renewed in leases), leases
    renewals = [s for s in sent if s.startswith("UPDATE task_claims SET lease_expires_at")]
    watches = [s for s in sent if s.startswith("SELECT runs.status, runs.cancel_requested")]
    held = max(moments["task.done"]) - min(moments["task.claimed"])
    beats = math.ceil(held / PERIOD) + 1
    assert not watches, watches
    assert 3 <= len(renewals) <= beats, (len(renewals), beats, renewals[:3])


def _running_sleepers(url: str, tmp_path: Path, items: int) -> tuple[Any, str, list[str]]:
    store = open_store(url)
    clock = SystemClock()
    run_id = create_run(
        store,
        prepare_run(_sleepers(tmp_path, items, 30), workspace=str(tmp_path)),
        clock=clock,
        ids=IdGenerator(clock),
    )
    with store.write() as conn:
        guarded_update(conn, "run", (run_id,), {"status": "running"})
    planned = (
        "SELECT task_id FROM plan_tasks WHERE run_id = ? AND task_id LIKE 'unit%' "
        "AND task_id <> 'unit' ORDER BY ordinal"
    )
    return store, run_id, [str(r[0]) for r in rows(url, planned, (run_id,))]


def test_a_lost_claim_stops_its_task_alone_and_a_cancel_stops_the_rest(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under one heartbeat, a claim withdrawn while its task runs ends ``lost`` while the
    others go on and are still renewed; then a cancel request ends them ``stopped``."""
    from agentctl.engine.run.claim_heartbeat import ClaimHeartbeat
    from agentctl.engine.run.claimed_tasks import RunSnapshots, execute_claimed
    from agentctl.engine.run.outcome import ExecutionOptions

    monkeypatch.setenv("AGENTCTL_LEASE_SECONDS", "1")
    store, run_id, tasks = _running_sleepers(postgres_url, tmp_path, 3)
    clock = SystemClock()
    try:
        with store.write() as conn:
            repo.publish(
                conn, run_id, [repo.Published(t, "b", '{"vars": {}}') for t in tasks], clock.now()
            )
            claimed = repo.claim_ready(conn, "w1", clock.now(), 3, ownership.lease_seconds())
        snapshots = RunSnapshots(store)
        options = ExecutionOptions(cancel_poll_seconds=3600, workspace=str(tmp_path))
        lease = "SELECT lease_expires_at FROM task_claims WHERE run_id = ? AND task_id = ?"

        async def main() -> tuple[list[str], float]:
            heartbeat = ClaimHeartbeat(store, clock)
            runs = [
                asyncio.create_task(
                    execute_claimed(
                        store, c, snapshots, clock=clock, options=options, heartbeat=heartbeat
                    )
                )
                for c in claimed
            ]
            await asyncio.sleep(0.5)
            first = claimed[0]
            await asyncio.to_thread(
                execute,
                postgres_url,
                "DELETE FROM task_claims WHERE run_id = ? AND task_id = ?",
                (run_id, first.task_id),
            )
            assert await asyncio.wait_for(runs[0], 5) == "lost"
            assert not runs[1].done() and not runs[2].done()
            before = await asyncio.to_thread(rows, postgres_url, lease, (run_id, tasks[1]))
            await asyncio.sleep(0.6)
            after = await asyncio.to_thread(rows, postgres_url, lease, (run_id, tasks[1]))
            assert after[0][0] > before[0][0]  # still renewed
            await asyncio.to_thread(
                execute,
                postgres_url,
                "UPDATE runs SET cancel_requested = 1 WHERE id = ?",
                (run_id,),
            )
            began = time.monotonic()
            ended = [await asyncio.wait_for(r, 5) for r in runs[1:]]
            return ended, time.monotonic() - began

        ended, took = asyncio.run(main())
    finally:
        store.close()
    assert ended == ["stopped", "stopped"]
    assert took < 3  # a beat or two, not the 30 s the tasks sleep
    assert rows(postgres_url, "SELECT count(*) FROM effects WHERE status = 'succeeded'") == [(0,)]
