"""What a worker repeats per claimed task, and what it does once, on a real PostgreSQL
server: a claimed task's environment copy and owner id are the worker's (made once), its
workspace policy its run snapshot's (resolved once); an idle
round of the worker's loop makes no task; the owner's fenced writes (publishing a batch,
withdrawing its claims) run at the driver; a session's BEGIN text is made once per scope.
Counts, never times (bench/RESULTS.md, "Worker-side CPU per claimed task")."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine import worker as workers
from agentctl.engine.run import attempts
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.worker import Worker, detach_run, wait_for_run
from agentctl.errors import OwnershipLostError
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import driver_sessions, locks, ownership
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import open_store
from tests.pg.backends import execute, rows
from tests.pg.test_claim_slots import _running_run
from tests.pg.test_statement_counts import _sent
from tests.pg.test_task_claims import _ledger, fan_out


def test_claimed_tasks_share_the_workers_environment_copy_and_owner_id(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six claimed tasks, one owner id for all of them besides the run's own claim (each
    used to make an owner id, reading /proc, copy the environment and resolve the
    workspace's roots); every task still runs once, with a provider pool of its own."""
    made: list[str] = []
    original = ownership.new_owner_id

    def counted() -> str:
        made.append(owner := original())
        return owner

    monkeypatch.setattr(ownership, "new_owner_id", counted)
    policies: list[Path] = []

    class Policy(attempts.WorkspacePolicy):
        def __init__(self, base_dir: Path, *args: Any) -> None:
            policies.append(base_dir)
            super().__init__(base_dir, *args)

    monkeypatch.setattr(attempts, "WorkspacePolicy", Policy)
    ledger = tmp_path / "ledger.txt"
    (tmp_path / "wf.yaml").write_text(fan_out(ledger, 6))
    store = open_store(postgres_url)
    clock = SystemClock()
    run_id = create_run(
        store,
        prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path)),
        clock=clock,
        ids=IdGenerator(clock),
    )
    detach_run(store, run_id)
    worker = Worker(store, name="w1", concurrency=2, clock=clock)

    async def main() -> str:
        serving = asyncio.create_task(worker.serve())
        try:
            return await wait_for_run(store, run_id)
        finally:
            worker.stop()
            await serving

    try:
        assert asyncio.run(main()) == "succeeded"
        claimed = rows(
            postgres_url, "SELECT count(*) FROM audit_events WHERE kind = 'effect.succeeded'"
        )
    finally:
        store.close()
    assert len(_ledger(ledger)) == 6
    assert claimed == [(6,)]
    assert len(made) == 2, made  # the run's claim, and the tasks' one
    # The workspace resolved once for the owner's execution, once for the worker's
    # snapshot of the run: not once per claimed task.
    assert len(policies) == 2, policies
    first, second = worker._claimed_task_options(), worker._claimed_task_options()
    assert first.environ is second.environ and first.owner_id == second.owner_id
    assert first.pool is not second.pool


def test_an_idle_worker_round_makes_no_task(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle worker waits on futures it keeps across rounds: a round used to make three
    tasks (its notification and stop waits, and the timeout's) and cancel them."""
    monkeypatch.setattr(workers, "IDLE_SECONDS", 0.01)
    store = open_store(postgres_url)
    worker = Worker(store, name="w1", concurrency=2, clock=SystemClock())
    rounds = 0
    look = worker._look

    def counted(*args: Any) -> tuple[bool, bool]:
        nonlocal rounds
        rounds += 1
        if rounds == 20:
            worker.stop()
        return look(*args)

    monkeypatch.setattr(worker, "_look", counted)
    made: list[Any] = []

    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
            made.append(coro)
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(factory)
        await worker.serve()
        return list(made)

    try:
        during = asyncio.run(main())
    finally:
        store.close()
    assert rounds >= 20
    # The listener's, the stop's and the first notification wait's: none per round.
    assert len(during) <= 3, [getattr(c, "__qualname__", c) for c in during]


def test_an_owners_fenced_write_runs_at_the_driver_and_a_stale_token_writes_nothing(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publishing a batch goes through the store's prepared statements (a driver session),
    not a SQLAlchemy connection's cursor; it is still fenced: once the run was taken over,
    the old owner's write fails and nothing of it lands."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 3)
    clock = SystemClock()
    try:
        with store.write(locks.run(run_id)) as conn:
            claim = ownership.claim(conn, run_id, ownership.new_owner_id(), clock.now())
        owned = ownership.OwnedRun(store, claim)
        published = [repo.Published(t, "basis", '{"vars": {}}') for t in tasks]
        cursor_texts: list[str] = []
        import psycopg

        cursor_execute = psycopg.Cursor.execute

        def by_cursor(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            cursor_texts.append(str(query))
            return cursor_execute(self, query, *args, **kwargs)

        with _sent(monkeypatch) as sent:
            monkeypatch.setattr(psycopg.Cursor, "execute", by_cursor)
            with owned.write() as conn:
                repo.publish(conn, run_id, published, clock.now())
            monkeypatch.setattr(psycopg.Cursor, "execute", cursor_execute)
        assert cursor_texts == []
        # The batch's new claim rows in one INSERT (store/task_claims_repo.py, publish).
        assert sum(s.startswith("INSERT INTO task_claims") for s in sent) == 1, sent
        assert sent[0].startswith("BEGIN") and sent[-1] == "COMMIT", sent
        # Taken over: the old owner's next write is refused, and rolled back whole.
        taken_over = "UPDATE runs SET owner_token = owner_token + 1 WHERE id = ?"
        execute(postgres_url, taken_over, (run_id,))
        with pytest.raises(OwnershipLostError), owned.write() as conn:
            repo.remove_claims(conn, run_id, tasks)
        assert rows(postgres_url, "SELECT count(*) FROM task_claims") == [(3,)]
    finally:
        store.close()


def test_a_sessions_begin_text_is_made_once_per_scope_and_not_for_autocommit(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id, _ = _running_run(postgres_url, tmp_path, 1)
    made: list[tuple[Any, ...]] = []
    begin = driver_sessions._begin_with

    def counted(*args: Any) -> Any:
        made.append(args)
        return begin(*args)

    monkeypatch.setattr(driver_sessions, "_BEGINS", {})
    monkeypatch.setattr(driver_sessions, "_begin_with", counted)
    try:
        for _ in range(3):
            with store.driver_session(scope=locks.run(run_id)) as session:
                with session.write():
                    pass
                with session.read():
                    pass
        with store.autocommit() as conn:
            repo.snapshot_key(conn, run_id)
        with _sent(monkeypatch) as sent:
            with store.driver_session(scope=locks.run(run_id)) as session, session.write():
                pass
    finally:
        store.close()
    assert [args[1] for args in made] == ["write", "read"]
    assert "; ".join(sent[:3]) == locks.begin_postgres(locks.run(run_id)), sent


def test_a_claimed_task_makes_two_tasks_on_its_worker(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per claimed task a worker makes its execution's task and the work's (which the
    heartbeat cancels), and nothing else: the claim's own heartbeat task is gone (one
    heartbeat renews every claim of the worker), so are the task ``wait_for`` made of
    the owner's wait for its batch each time an outcome's notification woke it, and the
    task the worker's loop made of its wait for the next notification (about one per
    claimed task). It was four to five per claimed task."""
    store = open_store(postgres_url)
    clock = SystemClock()
    (tmp_path / "wf.yaml").write_text(fan_out(tmp_path / "ledger.txt", 12))
    run_id = create_run(
        store,
        prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path)),
        clock=clock,
        ids=IdGenerator(clock),
    )
    detach_run(store, run_id)
    worker = Worker(store, name="w1", concurrency=2, clock=clock)
    made: list[str] = []

    async def main() -> str:
        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
            made.append(getattr(coro, "__qualname__", repr(coro)))
            return asyncio.Task(coro, loop=loop, **kwargs)

        asyncio.get_running_loop().set_task_factory(factory)
        serving = asyncio.create_task(worker.serve())
        try:
            return await wait_for_run(store, run_id)
        finally:
            worker.stop()
            await serving

    try:
        assert asyncio.run(main()) == "succeeded"
    finally:
        store.close()
    assert len(_ledger(tmp_path / "ledger.txt")) == 12
    per_task = ("Worker._execute_task", "_run_claimed")
    assert sum(1 for name in made if name in per_task) == 24, made
    # The rest are the run's (its driver, watchers, batch), the listeners', the
    # heartbeat's, the worker's and the test's own wait for the run (``Event.wait``):
    # none per task or per round of the worker's loop.
    others = collections.Counter(name for name in made if name not in per_task)
    assert max(others.values()) <= 3, others
