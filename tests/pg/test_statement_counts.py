"""How many statements a claimed task's store work sends to a real PostgreSQL server.

A claimed task's CPU, the worker's and the server's, is mostly per statement (bench/RESULTS.md,
"Worker CPU per claimed task", "Fewer statements per claimed task"), so these counts are the
regression test of that cost: a claim of ready tasks, a claim's outcome (with the owner's
wake-up), the move of a claimed task's effect to ``started`` (its fence in the update's
``WHERE``) and a one-statement read are one statement each, with no ``BEGIN`` or ``COMMIT``
around them; an effect is journaled by one statement that also reads its position; a budget
reservation and its settling are one statement each; a batch commit reads its run's audit
chain head once, however many events it appends; a batch is published by one insert,
however many tasks it holds. Counts, never times."""

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
from agentctl.store import claim_fences, locks, run_queue
from agentctl.store import task_claims_repo as repo
from tests.pg.backends import execute, rows
from tests.pg.test_claim_slots import _running_run


class Sent(list[str]):
    """The statements sent, in order, and how many round trips carried them."""

    round_trips = 0


@contextmanager
def _sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sent]:
    """Every statement this process sends to the server meanwhile, in order, with the
    ``COMMIT``/``ROLLBACK`` that psycopg sends for a connection's ``commit()``: through a
    cursor, or through a driver session's ``ServerStatements``, whose pipeline sends
    several in one round trip (each an entry, with its parameters written in); and the
    round trips (``round_trips``)."""
    import psycopg
    from psycopg import pq

    from agentctl.store.pg_statements import ServerStatements

    sent = Sent()
    execute_, commit, rollback = (
        psycopg.Cursor.execute,
        psycopg.Connection.commit,
        psycopg.Connection.rollback,
    )

    def counted(original: Any) -> Any:
        def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(" ".join(str(query).split()))
            sent.round_trips += 1
            return original(self, query, *args, **kwargs)

        return counted_execute

    def pipelined(original: Any) -> Any:
        def counted_pipeline(self: Any, steps: Any) -> Any:
            sent.extend(_written(text, params) for text, params in steps)
            sent.round_trips += 1
            return original(self, steps)

        return counted_pipeline

    def ending(name: str, original: Any) -> Any:
        def end(self: Any) -> None:
            if self.info.transaction_status != pq.TransactionStatus.IDLE:
                sent.append(name)
                sent.round_trips += 1
            original(self)

        return end

    with monkeypatch.context() as patched:
        patched.setattr(psycopg.Cursor, "execute", counted(execute_))
        # Its execute(text), a BEGIN or COMMIT, runs through run() too.
        patched.setattr(ServerStatements, "run", counted(ServerStatements.run))
        patched.setattr(ServerStatements, "pipeline", pipelined(ServerStatements.pipeline))
        patched.setattr(psycopg.Connection, "commit", ending("COMMIT", commit))
        patched.setattr(psycopg.Connection, "rollback", ending("ROLLBACK", rollback))
        yield sent


def _written(text: str, parameters: Any) -> str:
    """A pipelined statement with its parameters in place of its placeholders."""
    text = " ".join(text.split())
    return text if parameters is None else text % tuple(str(p) for p in parameters)


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
        listener.execute(f"LISTEN {run_queue.DONE_CHANNEL}")
        # The runs channel, which every worker listens on, hears no outcome.
        idle = psycopg.connect(postgres_url, autocommit=True)
        idle.execute(f"LISTEN {run_queue.CHANNEL}")
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
            claim_fences.finish_claim(
                conn, run_id, first.task_id, first.token, '{"ok": 1}', clock.now()
            )
        assert len(sent) == 1, sent
        woken = [n.payload for n in listener.notifies(timeout=2, stop_after=1)]
        assert woken == [f"done:{run_id}"]
        assert list(idle.notifies(timeout=0.5, stop_after=1)) == []
        idle.close()
        with pytest.raises(Exception, match="no longer holds"), store.autocommit() as conn:
            claim_fences.finish_claim(conn, run_id, second.task_id, 0, "{}", clock.now())
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
    needs no run lock takes no run lock and checks the fence in the round trip of its
    commit (the fence, then ``COMMIT``, pipelined): two round trips, ``BEGIN`` with the
    store lock and its write, then the fence with the commit (it was four)."""
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
        begin = ["BEGIN", f"SELECT pg_advisory_xact_lock_shared({locks.STORE_KEY})"]
        assert sent[:2] == begin, sent  # the store lock alone
        taken = [n for n, s in enumerate(sent) if "pg_advisory_xact_lock(" in s]
        assert len(taken) == 1 and "FOR SHARE OF c" in sent[taken[0]], sent
        inserted = next(n for n, s in enumerate(sent) if s.startswith("INSERT INTO effects"))
        assert inserted < taken[0]
        # The position is read by the insert itself (INSERT … WHERE NOT EXISTS), not apart.
        assert "NOT (EXISTS" in sent[inserted], sent
        assert not any(s.startswith("SELECT effects.") for s in sent), sent
        assert sent[taken[0] + 1].startswith("SELECT audit_events.seq"), sent
        assert sent[taken[0] + 2].startswith("INSERT INTO audit_events"), sent
        assert sent[taken[0] + 3 :] == ["COMMIT"], sent
        assert str(locks.key(name)) not in sent[1]
        # BEGIN with the effect's insert, the lock, the head, the append, the COMMIT.
        assert sent.round_trips == 5, sent
        with _sent(monkeypatch) as sent, fence.write() as conn:
            journal.set_status(conn, record.id, EffectState.STARTED, clock.now())
        assert not any("pg_advisory_xact_lock(" in s for s in sent), sent
        assert sent[:2] == begin and sent[2].startswith("UPDATE effects"), sent
        assert "FOR SHARE" in sent[3] and sent[4:] == ["COMMIT"], sent
        assert sent.round_trips == 2, sent
    finally:
        store.close()


def test_a_budget_reservation_and_its_settling_are_one_statement_each_and_limits_hold(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reservation checks every limit, moves the ledger and inserts its reservations in
    one statement (a conditional ``UPDATE`` in a ``WITH`` and the ``INSERT`` of the rows it
    moved; it used to read the ledger first, then update, then insert: three statements
    under the run's lock). A reservation that would pass a limit holds nothing, of any
    resource, and says which limit; one that reaches the limit exactly is held. Settling
    marks the reservations settled, gives them back and adds the usage in one statement
    (it was two), and reports an overrun from the rows it returns, without reading the
    ledger again."""
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
        assert len(touched) == 1, sent
        assert touched[0].startswith("WITH moved AS (UPDATE budgets"), sent
        assert "INSERT INTO budget_reservations" in touched[0], sent
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
        touched = [s for s in sent if "budget" in s]
        assert len(touched) == 1, sent  # settle, give back and use: one statement
        assert touched[0].startswith("WITH settled AS (UPDATE budget_reservations"), sent
        assert "UPDATE budgets SET reserved_units" in touched[0], sent
        assert held() == [("e3", "turns", 6.0)]  # e1's settled by an UPDATE, unread
        with store.write(locks.run(run_id)) as conn:
            assert budget.settle(conn, run_id, "e3", {"toolCalls": 1.0}, clock.now()) == []
        assert ledger() == {"turns": 0.0, "toolCalls": 0.0}
        assert held() == []
        # Two held reservations of one resource are both given back by the one statement.
        with store.write(locks.run(run_id)) as conn:
            for _ in range(2):
                units = {"toolCalls": 3.0}
                held_now = budget.reserve(conn, run_id, "e4", units, clock.now(), new_effect=True)
                assert held_now is None
        assert ledger() == {"turns": 0.0, "toolCalls": 6.0}
        with store.write(locks.run(run_id)) as conn:
            assert budget.settle(conn, run_id, "e4", {}, clock.now()) == []
        assert ledger() == {"turns": 0.0, "toolCalls": 0.0}
        assert held() == []
    finally:
        store.close()


def test_a_claimed_tasks_move_to_started_is_one_fenced_statement(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move of a claimed task's effect to ``started`` is one statement with no ``BEGIN``
    or ``COMMIT`` around it (it was a transaction: the claim's row read ``FOR SHARE``, then
    the update): the claim's fence is in the update's own ``WHERE``. A stale token changes
    nothing and is told it lost the claim; a wrong prior state is still a conflict; and
    nothing but a fenced transition can be written through it."""
    from agentctl.engine.effects import journal
    from agentctl.engine.run.claimed_tasks import ClaimFence
    from agentctl.errors import OwnershipLostError, StateConflictError
    from agentctl.store.states import EffectState

    store, run_id, tasks = _running_run(postgres_url, tmp_path, 2)
    clock = SystemClock()
    try:
        with store.write() as conn:
            published = [repo.Published(t, "b", "{}") for t in tasks]
            repo.publish(conn, run_id, published, clock.now())
            first, second = repo.claim_ready(conn, "w1", clock.now(), 2, lease_seconds=60)
        spec = journal.EffectSpec.classified("builtin.shell.exec", {"argv": ["true"]})
        effects = []
        for claimed in (first, second):
            with ClaimFence(store, claimed).write() as conn:
                record, _ = journal.request_effect(
                    conn, run_id=run_id, task_id=claimed.task_id, attempt=1, ordinal=1,
                    spec=spec, now=clock.now(),
                )  # fmt: skip
            effects.append(record.id)
        fence = ClaimFence(store, first)
        with _sent(monkeypatch) as sent, fence.row_write() as conn:
            journal.set_status(conn, effects[0], EffectState.STARTED, clock.now())
        assert len(sent) == 1, sent
        assert sent[0].startswith("UPDATE effects SET status") and "FOR SHARE" in sent[0], sent
        status = "SELECT status FROM effects WHERE id = ?"
        assert rows(postgres_url, status, (effects[0],)) == [("started",)]
        with pytest.raises(StateConflictError, match="is started"), fence.row_write() as conn:
            journal.set_status(conn, effects[0], EffectState.STARTED, clock.now())
        with pytest.raises(RuntimeError, match="guarded transitions only"):
            with fence.row_write() as conn:
                conn.exec_driver_sql("DELETE FROM effects WHERE id = %s", (effects[0],))
        # The second claim is withdrawn and taken again: its old holder writes nothing.
        execute(
            postgres_url,
            "UPDATE task_claims SET token = token + 1 WHERE run_id = ? AND task_id = ?",
            (run_id, second.task_id),
        )
        stale = ClaimFence(store, second)
        with pytest.raises(OwnershipLostError, match="no longer holds"):
            with stale.row_write() as conn:
                journal.set_status(conn, effects[1], EffectState.STARTED, clock.now())
        assert rows(postgres_url, status, (effects[1],)) == [("requested",)]
    finally:
        store.close()


def test_a_claimed_task_of_one_effect_makes_eight_round_trips_from_its_worker(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executing a claimed task of one process step, from its snapshot to its outcome on
    the claim, is two write transactions and one single statement on the worker: fourteen
    statements in eight round trips (each transaction's ``BEGIN`` and store lock go with
    its first statement, and its fence with its ``COMMIT``, each in one pipeline), and
    never the run's lock (its ``processOutputBytes`` has no limit: not reserved; it
    printed nothing, so no usage is pending either): the effect journaled ``started`` (it
    needs no approval: ``BEGIN`` with the store lock, the insert that also reads the
    position, the event into the claim's audit lane, the run's resources without a limit
    — read once per run in a process —, the claim's fence, ``COMMIT``), its outcome
    (``BEGIN``, the effect's update, the lane event, the fence, ``COMMIT``) and the
    claim's outcome. Counted as statements before the pipelines it was 12; it was 13
    with a fenced statement of its own moving the effect from
    ``requested`` to ``started``, 14 with the reservation and its settling under the run's
    lock, 16 with the chain's head read in both transactions (the events went to the run's
    chain), and 23 before that (a position read before the journal's transaction and again
    in it, a transaction of four for the move to ``started``, two statements per budget
    reservation and per settling)."""
    import asyncio

    from agentctl.engine.run.claimed_tasks import RunSnapshots, execute_claimed
    from agentctl.engine.run.outcome import ExecutionOptions

    store, run_id, _ = _running_run(postgres_url, tmp_path, 1)
    clock = SystemClock()
    try:
        planned = (
            "SELECT task_id FROM plan_tasks WHERE run_id = ? AND task_id LIKE 'unit%' "
            "AND task_id <> 'unit'"
        )
        (task_id,) = [str(r[0]) for r in rows(postgres_url, planned, (run_id,))]
        with store.write() as conn:
            published = [repo.Published(task_id, "b", '{"vars": {}}')]
            repo.publish(conn, run_id, published, clock.now())
            (claimed,) = repo.claim_ready(conn, "w1", clock.now(), 1, lease_seconds=60)
        snapshots = RunSnapshots(store)
        snapshots.get(claimed)  # the run's snapshot is read once per batch, not counted
        options = ExecutionOptions(cancel_poll_seconds=3600, workspace=str(tmp_path))
        with _sent(monkeypatch) as sent:
            how = asyncio.run(
                execute_claimed(store, claimed, snapshots, clock=clock, options=options)
            )
        assert how == "done"
        assert sent.count("BEGIN") == 2 and sent.count("COMMIT") == 2, sent
        fences = [n for n, s in enumerate(sent) if "FOR SHARE) AS held" in s]
        assert len(fences) == 2 and all(sent[n + 1] == "COMMIT" for n in fences), sent
        assert len(sent) == 14, "\n".join(sent)
        assert sent.round_trips == 8, "\n".join(sent)
        # The journal's insert wrote it started: no statement of its own moves it there.
        assert not any(
            s.startswith("UPDATE effects") and "started_at" in s.split("WHERE")[0] for s in sent
        ), sent
        assert not any("audit_events" in s for s in sent)  # the owner adopts the lane
        assert not any("pg_advisory_xact_lock(" in s for s in sent)  # nor the run's lock
    finally:
        store.close()


def test_a_batch_is_published_by_one_insert_whatever_its_size(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver publishes a batch's new rows with one ``INSERT`` (the ids, bases and
    payloads as arrays), where it sent one per task; a row already published with the same
    basis is kept as it is, one with another basis is replaced with its token bumped."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 6)
    clock = SystemClock()
    try:
        with _sent(monkeypatch) as sent, store.write() as conn:
            published = [repo.Published(t, "b", f'{{"n": {n}}}') for n, t in enumerate(tasks)]
            repo.publish(conn, run_id, published[:4], clock.now())
        inserts = [s for s in sent if s.startswith("INSERT INTO task_claims")]
        assert len(inserts) == 1 and "unnest" in inserts[0], sent
        with store.write() as conn:
            (claimed,) = repo.claim_ready(conn, "w1", clock.now(), 1, lease_seconds=60)
        assert claimed.task_id == tasks[0] and claimed.token == 1
        again = [published[0], repo.Published(tasks[1], "other", "{}"), *published[2:]]
        with _sent(monkeypatch) as sent, store.write() as conn:
            repo.publish(conn, run_id, again, clock.now())
        inserts = [s for s in sent if s.startswith("INSERT INTO task_claims")]
        assert len(inserts) == 1, sent
        found = rows(
            postgres_url,
            "SELECT task_id, state, basis, token, payload_json FROM task_claims "
            "WHERE run_id = ? ORDER BY task_id",
            (run_id,),
        )
        assert found == sorted(
            [
                (tasks[0], "claimed", "b", 1, '{"n": 0}'),  # kept, still claimed
                (tasks[1], "ready", "other", 1, "{}"),  # replaced, its token bumped
                *[(t, "ready", "b", 0, f'{{"n": {n}}}') for n, t in enumerate(tasks) if n > 1],
            ]
        )
    finally:
        store.close()
