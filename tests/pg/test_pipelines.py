"""Several statements in one round trip (libpq's pipeline mode, ``ServerStatements.pipeline``)
on a real server: a write's ``BEGIN`` with its advisory locks, each lock statement prepared
once per connection; a claimed task's fence with its ``COMMIT``, which the server skips when
the fence fails. Round trips counted, the fence still exact whatever happens to the claim
and when, a failed statement of a pipeline the same store error as alone, and a connection
lost in the middle of one ``store.unreachable`` (docs/postgresql.md, "Locks")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.engine.core.records import RunLog
from agentctl.engine.run.claimed_tasks import ClaimFence
from agentctl.errors import OwnershipLostError, PersistenceError
from agentctl.store import locks
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import Store, StoreSettings, open_store
from agentctl.store.errors import driver_error
from agentctl.store.pg_statements import ServerStatements
from tests.pg.backends import execute, rows
from tests.pg.test_claim_fences import NOW, _claims, _request
from tests.pg.test_claim_slots import _running_run
from tests.pg.test_statement_counts import _sent, _written


@contextmanager
def _round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times this process waits for the server meanwhile (``Connection.wait``:
    one per round trip, a statement, a pipeline, a PREPARE sent apart), in one counter."""
    waited = [0]
    wait = psycopg.Connection.wait

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        waited[0] += 1
        return wait(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(psycopg.Connection, "wait", counted)
        yield waited


def _effects(url: str, run_id: str) -> int:
    return int(rows(url, "SELECT COUNT(*) FROM effects WHERE run_id = ?", (run_id,))[0][0])


def test_a_claimed_tasks_write_is_two_round_trips_and_its_lock_is_planned_once(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claimed task's write of its own row that needs no run lock is two round trips:
    its ``BEGIN`` with the store lock and its write, then its fence with its ``COMMIT`` (it
    was four: the ``BEGIN``, the write, the fence, the ``COMMIT``). The lock statement is a
    prepared statement of the connection (it was a simple query, parsed and planned at
    every ``BEGIN``), and so is the fence."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    try:
        (claim,) = _claims(store, run_id, tasks)
        fence = ClaimFence(store, claim)
        with store.driver_session(late_fence=fence) as session:
            for n in range(8):  # past psycopg's threshold: every text prepared
                with session.write() as conn:
                    _request(conn, claim, n)
                execute(postgres_url, "DELETE FROM effects WHERE run_id = ?", (run_id,))
            with _round_trips(monkeypatch) as waited, session.write() as conn:
                _request(conn, claim, 99)
            assert waited[0] == 2, waited
            prepared = [
                str(row[0])
                for row in session.exec_driver_sql(
                    "SELECT statement FROM pg_prepared_statements", None
                )
            ]
        assert _effects(postgres_url, run_id) == 1
        assert any("pg_advisory_xact_lock_shared" in text for text in prepared), prepared
        assert any("FOR SHARE" in text and "count(*)" in text for text in prepared), prepared
    finally:
        store.close()


def test_a_runs_write_begins_with_its_locks_in_one_round_trip_in_key_order(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An owner's write (the store lock shared, the run's lock) is begun in one round trip,
    with both locks held from its first statement, as the one simple query held them."""
    store, run_id, _ = _running_run(postgres_url, tmp_path, 1)
    (name,) = locks.run(run_id).exclusive
    value = locks.key(name) & 0xFFFFFFFFFFFFFFFF
    held = (
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
        "AND classid::bigint = %s AND objid::bigint = %s AND mode = 'ExclusiveLock'"
    )
    try:
        with store.driver_session(scope=locks.run(run_id)) as session:
            with _round_trips(monkeypatch) as waited, session.write():
                pass
            assert waited[0] == 2, waited  # BEGIN with its locks, COMMIT
            with session.write() as conn:
                found = conn.exec_driver_sql(held, (value >> 32, value & 0xFFFFFFFF)).first()
            assert found == (1,)
        assert locks.begin_steps(locks.run(run_id)) == (
            ("BEGIN", None),
            (locks.SHARED_LOCK, (locks.STORE_KEY,)),
            (locks.EXCLUSIVE_LOCK, (locks.key(name),)),
        )
    finally:
        store.close()


#: What happens to the claim while its holder's write is open: nothing, a reclaim by
#: another worker (a new token), the owner's withdrawal (the row deleted), its outcome
#: recorded (``done``).
_CHANGES = {
    "kept": None,
    "reclaimed": "UPDATE task_claims SET token = token + 1, worker = 'other' "
    "WHERE run_id = ? AND task_id = ?",
    "withdrawn": "DELETE FROM task_claims WHERE run_id = ? AND task_id = ?",
    "done": "UPDATE task_claims SET state = 'done' WHERE run_id = ? AND task_id = ?",
}


@pytest.fixture
def one_claim(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Store, str, str]]:
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    try:
        yield store, run_id, tasks[0]
    finally:
        store.close()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    change=st.sampled_from(sorted(_CHANGES)),
    when=st.sampled_from(["before", "during"]),
    run_lock=st.booleans(),
    writes=st.integers(min_value=1, max_value=3),
)
def test_a_claimed_tasks_write_lands_exactly_when_its_claim_holds_at_the_commit(
    postgres_url: str,
    one_claim: tuple[Store, str, str],
    change: str,
    when: str,
    run_lock: bool,
    writes: int,
) -> None:
    """Whatever happens to the claim (reclaimed, withdrawn, finished) before its holder's
    write begins or while it is open, and whether the write took its run's lock late (the
    fence checked with it) or not (the fence checked with the ``COMMIT``, one round trip):
    it commits whole when the claim still holds, and otherwise raises
    ``OwnershipLostError`` with nothing of it landed, and the session goes on."""
    store, run_id, task_id = one_claim
    execute(postgres_url, "DELETE FROM effects WHERE run_id = ?", (run_id,))
    execute(postgres_url, "DELETE FROM task_claims WHERE run_id = ?", (run_id,))
    with store.write() as conn:
        repo.publish(conn, run_id, [repo.Published(task_id, "basis", "{}")], NOW)
        (claim,) = repo.claim_ready(conn, "w", NOW, 1, lease_seconds=60)
    changed = _CHANGES[change]
    log = RunLog(run_id, checkpoint_seq=0)
    fence = ClaimFence(store, claim)
    events = "SELECT COUNT(*) FROM audit_events WHERE run_id = ? AND kind = 'test.by_holder'"
    before = int(rows(postgres_url, events, (run_id,))[0][0])
    with store.driver_session(late_fence=fence) as session:
        if changed is not None and when == "before":
            execute(postgres_url, changed, (run_id, task_id))
        try:
            with session.write() as conn:
                for n in range(writes):
                    _more(conn, claim, n)
                if changed is not None and when == "during":
                    execute(postgres_url, changed, (run_id, task_id))
                if run_lock:
                    log.event(conn, "test.by_holder", {}, now=NOW, task_id=task_id)
        except OwnershipLostError as lost:
            assert changed is not None, lost
            assert "fencing token" in str(lost)
        else:
            assert changed is None
        assert _effects(postgres_url, run_id) == (0 if changed is not None else writes)
        appended = int(rows(postgres_url, events, (run_id,))[0][0]) - before
        assert appended == (1 if run_lock and changed is None else 0)
        # The same session goes on (its connection was left with no transaction open).
        with session.read() as conn:
            assert conn.exec_driver_sql("SELECT 1", None).first() == (1,)


def _more(conn: Any, claim: Any, n: int) -> None:
    """An effect of the claim's task at position ``n + 1`` (its own row)."""
    from agentctl.engine.effects import journal
    from tests.pg.test_claim_fences import _spec

    journal.request_effect(
        conn,
        run_id=claim.run_id,
        task_id=claim.task_id,
        attempt=1,
        ordinal=n + 1,
        spec=_spec(n),
        now=NOW,
    )


def test_a_failed_statement_of_a_pipeline_is_the_error_it_is_alone_and_commits_nothing(
    postgres_url: str,
) -> None:
    """A unique violation in a pipeline raises psycopg's ``UniqueViolation``, which the
    store classifies as it does when the statement runs alone; the ``COMMIT`` after it is
    skipped (nothing of the transaction lands), and a statement due to be prepared in the
    failed pipeline (never prepared: the server skipped it) is prepared afresh next time."""
    insert = "INSERT INTO pipelined (n) VALUES (%s)"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE pipelined (n integer PRIMARY KEY)")
        server = ServerStatements(connection)
        server.run(insert, (1,))
        with pytest.raises(psycopg.errors.UniqueViolation) as alone:
            server.run(insert, (1,))
        count = "SELECT count(*) FROM pipelined WHERE n > %s"
        for _ in range(5):  # one short of being prepared
            server.run(count, (0,))
        with pytest.raises(psycopg.errors.UniqueViolation) as piped:
            server.pipeline(
                [("BEGIN", None), (insert, (2,)), (insert, (1,)), (count, (0,)), ("COMMIT", None)]
            )
        assert connection.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        server.execute("ROLLBACK")
        assert server.run(count, (0,)) == ([(1,)], 1)  # n = 2 never committed
        assert server.pipeline([(count, (0,)), (count, (1,))]) == [([(1,)], 1), ([(0,)], 1)]
    assert type(piped.value) is type(alone.value)
    assert piped.value.sqlstate == alone.value.sqlstate == "23505"
    one, other = driver_error("pipelined", piped.value), driver_error("pipelined", alone.value)
    assert one.code == other.code


def test_a_write_whose_lock_times_out_in_its_pipelined_begin_is_store_locked(
    postgres_url: str, tmp_path: Path
) -> None:
    """A lock that times out in a pipelined ``BEGIN`` is ``store.locked`` (SQLSTATE 55P03),
    whether the write sent a statement (the lock is in that statement's round trip) or
    none (its locks are taken before it ends)."""
    store, run_id, _ = _running_run(postgres_url, tmp_path, 1)
    impatient = open_store(postgres_url, settings=StoreSettings(busy_timeout_ms=200))
    (name,) = locks.run(run_id).exclusive
    try:
        with (
            psycopg.connect(postgres_url) as holder,
            impatient.driver_session(scope=locks.run(run_id)) as session,
        ):
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (locks.key(name),))
            with pytest.raises(PersistenceError) as locked, session.write():
                pass
            assert locked.value.code == "store.locked" and "55P03" in locked.value.message
            # The BEGIN goes with the first statement: that statement is refused alike
            # (the failed transaction rolled back each time), and the session's next
            # transaction begins afresh once the lock is free.
            with pytest.raises(PersistenceError) as first, session.write() as conn:
                repo.snapshot_key(conn, run_id)
            assert first.value.code == "store.locked", first.value
            holder.rollback()
            with session.write() as conn:
                assert repo.snapshot_key(conn, run_id) is not None
    finally:
        impatient.close()
        store.close()


def test_a_connection_lost_before_the_fence_and_commit_pipeline_is_store_unreachable(
    postgres_url: str, tmp_path: Path
) -> None:
    """The server ends the worker's connection while its write is open: the pipeline of
    the fence and the ``COMMIT`` fails with ``store.unreachable`` (whether a commit landed
    is unknown to the worker; here nothing did), never a driver exception."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    try:
        (claim,) = _claims(store, run_id, tasks)
        with store.driver_session(late_fence=ClaimFence(store, claim)) as session:
            with pytest.raises(PersistenceError) as lost, session.write() as conn:
                _request(conn, claim)
                pid = conn.exec_driver_sql("SELECT pg_backend_pid()", None).first()[0]
                with psycopg.connect(postgres_url, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert lost.value.code == "store.unreachable", lost.value
        assert _effects(postgres_url, run_id) == 0
    finally:
        store.close()


def test_a_connection_lost_between_transactions_is_replaced_for_the_next_first_statement(
    postgres_url: str, tmp_path: Path
) -> None:
    """The server ended the session's connection after its last transaction: the next
    transaction's ``BEGIN``, locks and first statement (one pipeline, nothing of it
    committed) are sent again on a new connection, and the write lands once."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    try:
        (claim,) = _claims(store, run_id, tasks)
        with store.driver_session(late_fence=ClaimFence(store, claim)) as session:
            pid = session.exec_driver_sql("SELECT pg_backend_pid()", None).first()[0]
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            with session.write() as conn:
                _request(conn, claim)
            again = session.exec_driver_sql("SELECT pg_backend_pid()", None).first()[0]
        assert again != pid
        assert _effects(postgres_url, run_id) == 1
    finally:
        store.close()


def test_an_owners_write_checks_its_fence_in_the_round_trip_of_its_begin(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's write sends ``BEGIN``, its locks and its fencing read in one round trip
    (the fence was a round trip of its own): publishing a batch is five (its three
    statements and the ``COMMIT``), it was six. A stale owner's write is still refused,
    with nothing of it landed."""
    from agentctl.ids import SystemClock
    from agentctl.store import ownership

    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    clock = SystemClock()
    claims = "SELECT COUNT(*) FROM task_claims WHERE run_id = ?"
    try:
        with store.write(locks.run(run_id)) as conn:
            claim = ownership.claim(conn, run_id, ownership.new_owner_id(), clock.now())
        owned = ownership.OwnedRun(store, claim)
        published = [repo.Published(tasks[0], "basis", "{}")]
        lock_steps = locks.begin_steps(locks.run(run_id))[1:]
        with owned.driver_session() as session:
            for _ in range(6):  # every text prepared
                with session.write() as conn:
                    repo.snapshot_key(conn, run_id)
            with _sent(monkeypatch) as sent, session.write() as conn:
                repo.publish(conn, run_id, published, clock.now())
        assert sent[:3] == ["BEGIN", *[_written(*step) for step in lock_steps]], sent
        assert sent[3].startswith("SELECT runs.owner_token"), sent
        assert sent.round_trips == 5 and sent[-1] == "COMMIT", sent
        assert rows(postgres_url, claims, (run_id,)) == [(1,)]
        taken_over = "UPDATE runs SET owner_token = owner_token + 1 WHERE id = ?"
        execute(postgres_url, taken_over, (run_id,))
        execute(postgres_url, "DELETE FROM task_claims WHERE run_id = ?", (run_id,))
        with pytest.raises(OwnershipLostError), owned.write() as conn:
            repo.publish(conn, run_id, published, clock.now())
        assert rows(postgres_url, claims, (run_id,)) == [(0,)]
    finally:
        store.close()
