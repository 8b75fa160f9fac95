"""How workers take task claims on a real PostgreSQL server: never more than their free
slots, and without queueing behind the store's write lock for ready tasks and outcomes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.worker import Worker
from agentctl.errors import OwnershipLostError, PersistenceError
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import claim_fences
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import open_store
from agentctl.store.transitions import guarded_update
from tests.pg.backends import rows
from tests.pg.test_task_claims import _ledger, fan_out, fan_out_on_two_workers


def _running_run(url: str, tmp_path: Path, items: int) -> tuple[Any, str, list[str]]:
    """A store, a running run of ``items`` process steps, and their task ids."""
    (tmp_path / "wf.yaml").write_text(fan_out(tmp_path / "ledger.txt", items))
    prepared = prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path))
    store = open_store(url)
    clock = SystemClock()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    with store.write() as conn:
        guarded_update(conn, "run", (run_id,), {"status": "running"})
    return store, run_id, [f"unit[{i}]" for i in range(items)]


def test_ready_tasks_are_claimed_and_finished_while_another_writer_holds_the_write_lock(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim of ready tasks and a claim's outcome decide on their own rows: they go on
    while any other write transaction holds the store's write lock (they used to queue
    behind every write of every worker), the fencing token still refuses a stale
    outcome, and a reclaim (recorded with an audit event) still takes the write lock."""
    monkeypatch.setenv("AGENTCTL_SQLITE_BUSY_TIMEOUT_MS", "500")
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 3)
    clock = SystemClock()
    try:
        with store.write() as conn:
            published = [repo.Published(t, "basis", '{"vars": {}}') for t in tasks]
            repo.publish(conn, run_id, published, clock.now())
        worker = Worker(store, name="w1", concurrency=2, clock=clock)
        with store.write():  # another writer holds the write lock meanwhile
            claimed = worker._claim_tasks(2, None, reclaim=False)
            assert [c.task_id for c in claimed] == tasks[:2]  # no more than asked for
            first = claimed[0]
            with store.row_write() as conn:
                claim_fences.finish_claim(
                    conn, run_id, first.task_id, first.token, '{"ok": 1}', clock.now()
                )
            with pytest.raises(OwnershipLostError), store.row_write() as conn:
                stale = claimed[1].token - 1
                claim_fences.finish_claim(
                    conn, run_id, claimed[1].task_id, stale, "{}", clock.now()
                )
            with pytest.raises(PersistenceError) as held:
                worker._claim_tasks(1, None, reclaim=True)
            assert held.value.code == "store.locked"
        assert rows(
            postgres_url, "SELECT task_id, state, worker FROM task_claims ORDER BY task_id"
        ) == [("unit[0]", "done", "w1"), ("unit[1]", "claimed", "w1"), ("unit[2]", "ready", None)]
        # Without the other writer, a second worker takes what is left, once.
        other = Worker(store, name="w2", concurrency=4, clock=clock)
        assert [c.task_id for c in other._claim_tasks(4, None, reclaim=False)] == ["unit[2]"]
        assert other._claim_tasks(4, None, reclaim=False) == []
    finally:
        store.close()


def _in_flight_peak(events: list[dict[str, Any]]) -> int:
    """The most claimed tasks one worker held at once, from its events in order."""
    held = peak = 0
    for event in events:
        state = str(event["data"].get("state", ""))
        if state == "task.claimed":
            held += 1
            peak = max(peak, held)
        elif state.startswith("task.") and "taskId" in event["data"]:
            held -= 1
    return peak


def test_workers_hold_no_more_claims_than_their_slots_and_share_a_fan_out(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Two workers of two slots each and a 40-task batch: neither ever holds more than
    two tasks (the rest stay claimable for the other), every task runs once."""
    with fan_out_on_two_workers(cli, postgres_url, tmp_path, 40) as done:
        assert done.waited.exit_code == 0, done.waited.stdout + done.waited.stderr
    lines = _ledger(done.ledger)
    assert len(lines) == 40 and len(set(lines)) == 40
    peaks = [_in_flight_peak(report) for report in done.reports]
    assert all(1 <= peak <= 2 for peak in peaks), peaks


def test_a_claimed_effect_starts_without_the_write_lock_and_a_reclaim_in_flight_fences_it(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving a claimed task's effect to ``started`` goes on while another writer holds
    the write lock (one statement, the claim's fence in its WHERE). A reclaim in flight
    (its transaction moved the claim's token, not committed yet) makes that statement
    wait for it, and it is then refused by the token it finds (the claim's row is read
    ``FOR SHARE``, which follows the row's latest version); a stale claim's move writes
    nothing."""
    import threading
    from datetime import timedelta

    import psycopg

    from agentctl.engine.effects import journal
    from agentctl.engine.run.claimed_tasks import ClaimFence

    monkeypatch.setenv("AGENTCTL_SQLITE_BUSY_TIMEOUT_MS", "500")
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    clock = SystemClock()
    now = clock.now()
    try:
        with store.write() as conn:
            repo.publish(conn, run_id, [repo.Published(tasks[0], "b", "{}")], now)
            (claim,) = repo.claim_ready(conn, "A", now, 1, lease_seconds=1)
            spec = journal.EffectSpec.classified("builtin.shell.exec", {"command": "sh"})
            effect = journal.insert_requested(
                conn, run_id=run_id, task_id=tasks[0], attempt=1, ordinal=1, spec=spec,
                now=now,
            )  # fmt: skip
        with store.write(), ClaimFence(store, claim).row_write() as conn:
            journal.set_status(conn, effect.id, "started", now)
        assert rows(postgres_url, "SELECT status FROM effects") == [("started",)]
        reclaim = psycopg.connect(postgres_url)
        reclaim.execute(
            "UPDATE task_claims SET token = token + 1, worker = 'B' "
            "WHERE run_id = %s AND task_id = %s",
            (run_id, tasks[0]),
        )
        refused: list[BaseException] = []

        def move() -> None:
            try:
                with ClaimFence(store, claim).row_write() as fenced:
                    journal.set_status(fenced, effect.id, "uncertain", now)
            except BaseException as exc:  # noqa: BLE001 - the test reads it below
                refused.append(exc)

        mover = threading.Thread(target=move)
        mover.start()
        waiting = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        for _ in range(500):
            if rows(postgres_url, waiting) == [(1,)]:
                break
            threading.Event().wait(0.01)
        assert rows(postgres_url, waiting) == [(1,)]  # the move waits for the reclaim
        reclaim.commit()
        reclaim.close()
        mover.join(30)
        assert [type(e) for e in refused] == [OwnershipLostError], refused
        assert rows(postgres_url, "SELECT status FROM effects") == [("started",)]
        later = now + timedelta(seconds=5)  # the claim's lease has run out by then
        with store.write() as conn:
            (taken,) = repo.claim_ready(conn, "C", later, 1, 60, reclaim=True)
        assert (taken.previous_worker, taken.token) == ("B", claim.token + 2)
        with pytest.raises(OwnershipLostError), ClaimFence(store, claim).row_write() as conn:
            journal.set_status(conn, effect.id, "uncertain", now)
        assert rows(postgres_url, "SELECT status FROM effects") == [("started",)]
    finally:
        store.close()


def test_an_owner_waiting_for_its_batch_counts_outcomes_and_reads_them_once_all_are_done(
    postgres_url: str, tmp_path: Path
) -> None:
    """The owner's wake-up reads one count row until the batch is done, then every
    outcome; a batch whose claims were withdrawn (some or all) ends the wait."""
    import asyncio
    from types import SimpleNamespace

    from agentctl.engine.run.task_claims import TaskClaims

    store, run_id, tasks = _running_run(postgres_url, tmp_path, 3)
    clock = SystemClock()
    owner = SimpleNamespace(store=store, run_id=run_id)
    claims = TaskClaims(lambda _payloads: asyncio.Event(), lambda _event: None)
    try:
        with store.write() as conn:
            repo.publish(conn, run_id, [repo.Published(t, "b", "{}") for t in tasks], clock.now())
            claimed = repo.claim_ready(conn, "w1", clock.now(), 3, 60)
        for item in claimed[:2]:
            with store.row_write() as conn:
                claim_fences.finish_claim(
                    conn, run_id, item.task_id, item.token, '{"n": 1}', clock.now()
                )
        with store.read() as conn:
            assert repo.claims_done(conn, run_id, tasks) == (3, 2)
        last = claimed[2]
        with store.row_write() as conn:
            claim_fences.finish_claim(
                conn, run_id, last.task_id, last.token, '{"n": 3}', clock.now()
            )
        states = asyncio.run(claims._wait_done(owner, tasks, asyncio.Event()))  # type: ignore[arg-type]
        assert states == {t: ("done", '{"n": 3}' if t == tasks[2] else '{"n": 1}') for t in tasks}
        for withdrawn in ([tasks[0]], None):  # one claim, then all of them
            with store.write() as conn:
                repo.remove_claims(conn, run_id, withdrawn)
            with pytest.raises(OwnershipLostError, match="withdrawn"):
                asyncio.run(claims._wait_done(owner, tasks, asyncio.Event()))  # type: ignore[arg-type]
    finally:
        store.close()


def test_an_owner_counts_the_outcomes_it_hears_and_reads_its_claims_once_all_were_heard(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each outcome sends one ``done:RUN``: an owner that hears them through its
    subscription reads the claims when it has heard as many as its batch has tasks (it
    used to count the done rows on every wake-up, a statement per task), and at once on
    a notification of its run's status (claims withdrawn by a takeover). No periodic
    look here: IDLE_SECONDS is an hour, so only notifications can make it read."""
    import asyncio
    from types import SimpleNamespace

    from agentctl.engine.run import task_claims
    from agentctl.engine.run.task_claims import TaskClaims
    from agentctl.store.run_queue import Subscription

    monkeypatch.setattr(task_claims, "IDLE_SECONDS", 3600.0)
    counted: list[str] = []
    claims_done = repo.claims_done

    def counting(conn: Any, run_id: str, task_ids: list[str]) -> tuple[int, int]:
        counted.append(run_id)
        return claims_done(conn, run_id, task_ids)

    monkeypatch.setattr(task_claims.task_claims_repo, "claims_done", counting)
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 3)
    clock = SystemClock()
    owner = SimpleNamespace(store=store, run_id=run_id)
    claims = TaskClaims(lambda _payloads: Subscription(), lambda _event: None)

    def finish(item: repo.ClaimedTask, wake: Subscription) -> None:
        with store.row_write() as conn:
            claim_fences.finish_claim(conn, run_id, item.task_id, item.token, "{}", clock.now())
        wake.hear(f"done:{run_id}")

    async def batch(withdraw: bool) -> Any:
        wake = Subscription()
        waiting = asyncio.ensure_future(claims._wait_done(owner, tasks, wake))  # type: ignore[arg-type]
        await asyncio.sleep(0)  # its first look: nothing done yet
        for item in claimed[:2]:
            finish(item, wake)
            while wake.is_set():  # until the owner took it (and looked, or not)
                await asyncio.sleep(0)
        if withdraw:
            with store.write() as conn:
                repo.remove_claims(conn, run_id, None)
            wake.hear(run_id)  # the takeover's status notification
        else:
            finish(claimed[2], wake)
        return await asyncio.wait_for(waiting, 60)

    try:
        with store.write() as conn:
            repo.publish(conn, run_id, [repo.Published(t, "b", "{}") for t in tasks], clock.now())
            claimed = repo.claim_ready(conn, "w1", clock.now(), 3, 60)
        states = asyncio.run(batch(withdraw=False))
        assert set(states) == set(tasks)
        assert len(counted) == 2  # the first look, then once the third outcome was heard
        with store.write() as conn:
            repo.remove_claims(conn, run_id, None)
            repo.publish(conn, run_id, [repo.Published(t, "c", "{}") for t in tasks], clock.now())
            claimed = repo.claim_ready(conn, "w1", clock.now(), 3, 60)
        counted.clear()
        with pytest.raises(OwnershipLostError, match="withdrawn"):
            asyncio.run(batch(withdraw=True))
        assert len(counted) == 2  # the first look, then the status notification's
    finally:
        store.close()


def test_a_worker_loads_what_its_first_claimed_task_needs_before_it_is_ready(
    postgres_url: str,
) -> None:
    """In a fresh process, by the time a worker reports ``ready`` the artifact store and
    the providers' HTTP stack are loaded and the TLS context built: its first claimed
    tasks no longer pay for them while holding their claims and their batch."""
    import subprocess
    import sys

    script = f"""
import asyncio, sys
from agentctl.engine.worker import Worker
from agentctl.ids import SystemClock
from agentctl.store.engine import open_store

store = open_store({postgres_url!r})
def events(kind, data):
    if data.get("state") == "ready":
        from agentctl.providers import http
        wanted = ["agentctl.artifacts.store", "httpcore"]
        built = http._tls_context.cache_info().currsize
        print(sorted(m for m in wanted if m in sys.modules), built)
        worker.stop()
worker = Worker(store, name="w1", concurrency=1, clock=SystemClock(), events=events)
asyncio.run(worker.serve())
store.close()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['agentctl.artifacts.store', 'httpcore'] 1"
