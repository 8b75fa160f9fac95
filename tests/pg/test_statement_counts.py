"""How many statements a claimed task's store work sends to a real PostgreSQL server.

A claimed task's CPU, the worker's and the server's, is mostly per statement (bench/RESULTS.md,
"Worker CPU per claimed task"), so these counts are the regression test of that cost: a
claim of ready tasks, a claim's outcome (with the owner's wake-up) and a one-statement read
are one statement each, with no ``BEGIN`` or ``COMMIT`` around them; a batch commit reads
its run's audit chain head once, however many events it appends. Counts, never times."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.core.records import RunLog
from agentctl.engine.worker import Worker
from agentctl.ids import SystemClock
from agentctl.observability.audit import verify_chain
from agentctl.store import locks, run_queue
from agentctl.store import task_claims_repo as repo
from tests.pg.backends import execute, rows
from tests.pg.test_claim_slots import _running_run


@contextmanager
def _sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement this process sends to the server meanwhile, in order, with the
    ``COMMIT``/``ROLLBACK`` that psycopg sends for a connection's ``commit()``: through a
    cursor, or through a driver session's ``ServerStatements``."""
    import psycopg
    from psycopg import pq

    from agentctl.store.pg_statements import ServerStatements

    sent: list[str] = []
    execute_, commit, rollback = (
        psycopg.Cursor.execute,
        psycopg.Connection.commit,
        psycopg.Connection.rollback,
    )

    def counted(original: Any) -> Any:
        def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(" ".join(str(query).split()))
            return original(self, query, *args, **kwargs)

        return counted_execute

    def ending(name: str, original: Any) -> Any:
        def end(self: Any) -> None:
            if self.info.transaction_status != pq.TransactionStatus.IDLE:
                sent.append(name)
            original(self)

        return end

    with monkeypatch.context() as patched:
        patched.setattr(psycopg.Cursor, "execute", counted(execute_))
        # Its execute(text), a BEGIN or COMMIT, runs through run() too.
        patched.setattr(ServerStatements, "run", counted(ServerStatements.run))
        patched.setattr(psycopg.Connection, "commit", ending("COMMIT", commit))
        patched.setattr(psycopg.Connection, "rollback", ending("ROLLBACK", rollback))
        yield sent


def test_a_claim_and_a_claims_outcome_are_one_statement_each(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's claim of ready tasks is one statement however many it takes (it used to
    be a transaction, the pick and an update per row), and so is the outcome with the
    owner's wake-up (a transaction, the update and a notification). Both still decide by
    the claim's row: a row locked by another worker is passed by, a stale token writes
    nothing, and the owner is woken once the outcome is committed."""
    import psycopg

    store, run_id, tasks = _running_run(postgres_url, tmp_path, 4)
    clock = SystemClock()
    listener = psycopg.connect(postgres_url, autocommit=True)
    try:
        with store.write() as conn:
            published = [repo.Published(t, "basis", '{"vars": {}}') for t in tasks]
            repo.publish(conn, run_id, published, clock.now())
        listener.execute(f"LISTEN {run_queue.CHANNEL}")
        with store.read() as conn:
            key = repo.snapshot_key(conn, run_id)
        worker = Worker(store, name="w1", concurrency=4, clock=clock)
        # Another worker is claiming the oldest row right now: it is passed by.
        other = psycopg.connect(postgres_url)
        other.execute(
            "SELECT 1 FROM task_claims WHERE run_id = %s AND task_id = %s FOR UPDATE",
            (run_id, tasks[0]),
        )
        with _sent(monkeypatch) as sent:
            claimed = worker._claim_tasks(2, None, reclaim=False)
        other.rollback()
        other.close()
        assert len(sent) == 1, sent
        assert [c.task_id for c in claimed] == tasks[1:3]  # oldest first, no more than asked
        assert {c.token for c in claimed} == {1}
        assert {c.snapshot_key for c in claimed} == {key}
        assert {c.previous_worker for c in claimed} == {None}
        first, second = claimed
        with _sent(monkeypatch) as sent, store.autocommit() as conn:
            repo.finish_claim(conn, run_id, first.task_id, first.token, '{"ok": 1}', clock.now())
        assert len(sent) == 1, sent
        woken = [n.payload for n in listener.notifies(timeout=2, stop_after=1)]
        assert woken == [f"done:{run_id}"]
        with pytest.raises(Exception, match="no longer holds"), store.autocommit() as conn:
            repo.finish_claim(conn, run_id, second.task_id, 0, "{}", clock.now())
        assert list(listener.notifies(timeout=0.5, stop_after=1)) == []  # nothing written
        assert rows(
            postgres_url,
            "SELECT task_id, state, worker, token FROM task_claims ORDER BY task_id",
        ) == [
            (tasks[0], "ready", None, 0),
            (tasks[1], "done", "w1", 1),
            (tasks[2], "claimed", "w1", 1),
            (tasks[3], "ready", None, 0),
        ]
        # A run no longer running has nothing to claim.
        execute(postgres_url, "UPDATE runs SET status = 'paused' WHERE id = ?", (run_id,))
        assert worker._claim_tasks(4, None, reclaim=False) == []
    finally:
        listener.close()
        store.close()


def test_a_one_statement_read_sends_no_begin_and_refuses_a_second_statement(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 2)
    try:
        with _sent(monkeypatch) as sent, store.read_one() as conn:
            assert repo.run_watch(conn, run_id) == ("running", False)
        assert len(sent) == 1, sent
        with (
            pytest.raises(RuntimeError, match="one statement"),
            store.read_one() as conn,
        ):
            repo.claims_done(conn, run_id, tasks)
            repo.claims_done(conn, run_id, tasks)
    finally:
        store.close()


def test_a_transaction_reads_a_runs_chain_head_once_and_the_chain_verifies(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch commit appends an event per task; the head is read once per transaction
    and carried (every writer of the chain holds the run's lock), and a transaction that
    rolled back leaves nothing carried into the next one."""
    store, run_id, _ = _running_run(postgres_url, tmp_path, 1)
    clock = SystemClock()
    log = RunLog(run_id, checkpoint_seq=0)
    try:
        with store.driver_session(scope=locks.run(run_id)) as session:
            with _sent(monkeypatch) as sent, session.write() as conn:
                for n in range(5):
                    log.event(conn, "test.event", {"n": n}, now=clock.now())
            heads = [s for s in sent if s.startswith("SELECT audit_events.seq")]
            assert len(heads) == 1, sent
            with pytest.raises(ZeroDivisionError), session.write() as conn:
                log.event(conn, "test.rolled_back", {}, now=clock.now())
                raise ZeroDivisionError
            with session.write() as conn:
                log.event(conn, "test.after", {}, now=clock.now())
        with store.write(locks.run(run_id)) as conn:  # a SQLAlchemy one appends after it
            log.event(conn, "test.last", {}, now=clock.now())
        with store.read() as conn:
            report = verify_chain(conn, run_id)
        assert report.ok, report
        kinds = [
            r[0]
            for r in rows(
                postgres_url,
                "SELECT kind FROM audit_events WHERE run_id = ? AND kind LIKE 'test.%' "
                "ORDER BY seq",
                (run_id,),
            )
        ]
        assert kinds == [*["test.event"] * 5, "test.after", "test.last"]
    finally:
        store.close()


def test_a_claimed_tasks_write_takes_its_runs_lock_last_right_before_the_chain_head(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claimed task's write begins with the store lock alone, writes its own effect row,
    and takes the run's lock (with the claim's fence, one statement) only right before it
    reads the run's chain head: held for the head, the append and the commit. A write that
    needs no run lock checks the fence just before its commit and takes no run lock."""
    from agentctl.engine.effects import journal
    from agentctl.engine.run.claimed_tasks import ClaimFence
    from agentctl.store.states import EffectState

    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    clock = SystemClock()
    log = RunLog(run_id, checkpoint_seq=0)
    (name,) = locks.run(run_id).exclusive
    try:
        with store.write() as conn:
            repo.publish(conn, run_id, [repo.Published(tasks[0], "b", "{}")], clock.now())
            (claimed,) = repo.claim_ready(conn, "w1", clock.now(), 1, lease_seconds=60)
        fence = ClaimFence(store, claimed)
        spec = journal.EffectSpec.classified("builtin.shell.exec", {"argv": ["true"]})
        with _sent(monkeypatch) as sent, fence.write() as conn:
            record, _ = journal.request_effect(
                conn, run_id=run_id, task_id=tasks[0], attempt=1, ordinal=1, spec=spec,
                now=clock.now(),
            )  # fmt: skip
            log.event(conn, "test.requested", {}, now=clock.now(), task_id=tasks[0])
        begin = f"BEGIN; SELECT pg_advisory_xact_lock_shared({locks.STORE_KEY})"
        assert sent[0] == begin, sent  # the store lock alone
        taken = [n for n, s in enumerate(sent) if "pg_advisory_xact_lock(" in s]
        assert len(taken) == 1 and "FOR SHARE OF c" in sent[taken[0]], sent
        inserted = next(n for n, s in enumerate(sent) if s.startswith("INSERT INTO effects"))
        assert inserted < taken[0]
        assert sent[taken[0] + 1].startswith("SELECT audit_events.seq"), sent
        assert sent[taken[0] + 2].startswith("INSERT INTO audit_events"), sent
        assert sent[taken[0] + 3 :] == ["COMMIT"], sent
        assert str(locks.key(name)) not in sent[0]
        with _sent(monkeypatch) as sent, fence.write() as conn:
            journal.set_status(conn, record.id, EffectState.STARTED, clock.now())
        assert not any("pg_advisory_xact_lock(" in s for s in sent), sent
        assert "FOR SHARE" in sent[-2] and sent[-1] == "COMMIT", sent
    finally:
        store.close()


def test_a_budget_reservation_is_one_update_and_its_insert_and_limits_still_hold(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reservation checks every limit and moves the ledger in one conditional ``UPDATE``
    (it used to read the ledger first, one more statement under the run's lock), then
    inserts its reservations. A reservation that would pass a limit holds nothing, of any
    resource, and says which limit; one that reaches the limit exactly is held. Settling
    gives the reservations back and adds the usage in one ``UPDATE``, and reports an
    overrun from the rows it returns, without reading the ledger again."""
    from agentctl.engine.effects import budget

    store, run_id, _ = _running_run(postgres_url, tmp_path, 1)
    clock = SystemClock()
    execute(
        postgres_url,
        "UPDATE budgets SET limit_units = 10 WHERE run_id = ? AND resource = 'turns'",
        (run_id,),
    )

    def ledger() -> dict[str, float]:
        found = rows(
            postgres_url,
            "SELECT resource, reserved_units FROM budgets WHERE run_id = ? "
            "AND resource IN ('turns', 'toolCalls')",
            (run_id,),
        )
        return {str(r[0]): float(r[1]) for r in found}

    def held() -> list[tuple[str, str, float]]:
        found = rows(
            postgres_url,
            "SELECT effect_id, resource, units FROM budget_reservations WHERE run_id = ? "
            "AND status = 'held' ORDER BY effect_id, resource",
            (run_id,),
        )
        return [(str(r[0]), str(r[1]), float(r[2])) for r in found]

    try:
        with _sent(monkeypatch) as sent, store.write(locks.run(run_id)) as conn:
            units = {"turns": 4.0, "toolCalls": 2.0, "costMicrousd": 0.0}
            assert budget.reserve(conn, run_id, "e1", units, clock.now(), new_effect=True) is None
        touched = [s for s in sent if "budget" in s]
        assert len(touched) == 2, sent
        assert touched[0].startswith("UPDATE budgets") and "RETURNING" in touched[0], sent
        assert touched[1].startswith("INSERT INTO budget_reservations"), sent
        assert ledger() == {"turns": 4.0, "toolCalls": 2.0}
        with store.write(locks.run(run_id)) as conn:
            units = {"toolCalls": 1.0, "turns": 7.0}
            denied = budget.reserve(conn, run_id, "e2", units, clock.now(), new_effect=True)
        assert denied == budget.BudgetDenied("turns", 10.0, 0.0, 4.0, 7.0)
        assert ledger() == {"turns": 4.0, "toolCalls": 2.0}  # all or nothing
        with store.write(locks.run(run_id)) as conn:
            units = {"turns": 6.0}
            assert budget.reserve(conn, run_id, "e3", units, clock.now(), new_effect=True) is None
        assert ledger() == {"turns": 10.0, "toolCalls": 2.0}
        assert held() == [
            ("e1", "toolCalls", 2.0),
            ("e1", "turns", 4.0),
            ("e3", "turns", 6.0),
        ]
        # Settling checks the limits on the rows its usage moved (RETURNING), unread.
        with _sent(monkeypatch) as sent, store.write(locks.run(run_id)) as conn:
            measured = {"turns": 12.0, "toolCalls": 0.0}  # zero: moved by nothing, unread
            overruns = budget.settle(conn, run_id, "e1", measured, clock.now())
        assert overruns == [budget.BudgetDenied("turns", 10.0, 12.0, 6.0, 0.0)]
        assert not any(s.startswith("SELECT budgets.") for s in sent), sent
        moved = [s for s in sent if s.startswith("UPDATE budgets ")]
        assert len(moved) == 1 and "reserved_units" in moved[0], sent  # give back and use
        assert not any(s.startswith("SELECT budget_reservations.") for s in sent), sent
        assert held() == [("e3", "turns", 6.0)]  # e1's settled by an UPDATE, unread
        with store.write(locks.run(run_id)) as conn:
            assert budget.settle(conn, run_id, "e3", {"toolCalls": 1.0}, clock.now()) == []
        assert ledger() == {"turns": 0.0, "toolCalls": 0.0}
        assert held() == []
    finally:
        store.close()
