"""Per-run locks on a real server (docs/postgresql.md, "Locks"): a write of one run never
waits for another run's write, two writes of one run are serialised, the fence is exact,
and a write that names no scope still has the whole store to itself."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from agentctl.errors import OwnershipLostError, PersistenceError
from agentctl.store import locks, ownership, run_queue
from agentctl.store.engine import Store, StoreSettings, open_store
from tests.pg.cluster import Cluster

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def stores(postgres_cluster: Cluster) -> Iterator[tuple[Store, Store]]:
    """Two stores on one database (two processes' pools); the second gives up on a lock
    after 200 ms, so a wait shows as ``store.locked`` at once."""
    url = postgres_cluster.take_migrated()
    first = open_store(url)
    second = open_store(url, settings=StoreSettings(busy_timeout_ms=200))
    with first.write() as conn:
        for run_id in ("run-a", "run-b"):
            conn.exec_driver_sql(
                "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json, "
                "status, created_at, updated_at) VALUES (?, 'wf', 'a', 'b', '{}', 'running', "
                "?, ?)",
                (run_id, NOW, NOW),
            )
    try:
        yield first, second
    finally:
        first.close()
        second.close()
        postgres_cluster.give_back(url)


def _touch(conn: object, run_id: str, reason: str) -> None:
    conn.exec_driver_sql(  # type: ignore[attr-defined]
        "UPDATE runs SET reason = ? WHERE id = ?", (reason, run_id)
    )


def _reason(store: Store, run_id: str) -> str | None:
    with store.read() as conn:
        row = conn.exec_driver_sql("SELECT reason FROM runs WHERE id = ?", (run_id,)).first()
    return None if row is None else row[0]


def test_run_b_commits_while_a_write_of_run_a_is_open(stores: tuple[Store, Store]) -> None:
    first, second = stores
    with first.write(locks.run("run-a")) as held:
        _touch(held, "run-a", "a, still open")
        # The other run's write, at the driver (the executor's path) and through SQLAlchemy.
        with second.driver_session(scope=locks.run("run-b")) as session, session.write() as c:
            _touch(c, "run-b", "b at the driver")
        assert _reason(second, "run-b") == "b at the driver"
        with second.write(locks.run("run-b")) as conn:
            _touch(conn, "run-b", "b committed")
        assert _reason(second, "run-b") == "b committed"
        # A second write of run A waits for the first (here: gives up after 200 ms).
        with pytest.raises(PersistenceError) as same_run, second.write(locks.run("run-a")):
            pass
        assert same_run.value.code == "store.locked"
        # A write that names no scope has the whole store to itself: it waits too.
        with pytest.raises(PersistenceError) as whole, second.write():
            pass
        assert whole.value.code == "store.locked"
        # A worker's claim passes a run whose write is in flight by, without waiting.
        with second.write(locks.Locks()) as conn:
            assert run_queue.try_run_lock(conn, "run-a") is False
            assert run_queue.try_run_lock(conn, "run-b") is True
    assert _reason(first, "run-a") == "a, still open"


def test_a_store_wide_write_holds_back_every_run(stores: tuple[Store, Store]) -> None:
    first, second = stores
    with first.write():
        for run_id in ("run-a", "run-b"):
            with pytest.raises(PersistenceError) as info, second.write(locks.run(run_id)):
                pass
            assert info.value.code == "store.locked"
    with second.write(locks.run("run-a")) as conn:  # and nothing is left held
        _touch(conn, "run-a", "after")


def test_the_fence_is_exact_under_the_run_lock(stores: tuple[Store, Store]) -> None:
    """An owner's write checks its token under the run's lock: a takeover cannot commit
    between the check and the owner's commit, and once it has, the owner writes nothing."""
    first, second = stores
    with first.write(locks.run("run-b")) as conn:
        claim = ownership.claim(conn, "run-b", "owner-1", NOW)
    owner = ownership.OwnedRun(first, claim)
    with owner.write() as conn:
        _touch(conn, "run-b", "the owner's")
        with pytest.raises(PersistenceError) as waited, second.write(locks.run("run-b")):
            pass  # a takeover is a write of the run: it waits for the owner's commit
        assert waited.value.code == "store.locked"
    with second.write(locks.run("run-b")) as conn:
        ownership.clear_owner(conn, "run-b")
    with pytest.raises(OwnershipLostError), owner.write() as conn:
        _touch(conn, "run-b", "stale")
    assert _reason(first, "run-b") == "the owner's"


def test_lock_keys_are_stable_and_taken_in_one_order() -> None:
    assert locks.key("run:x") == locks.key("run:x") != locks.key("run:y")
    begin = locks.begin_postgres(locks.Locks(exclusive=("run:b", "run:a"), shared=("cat",)))
    taken = [part.split("(")[1].rstrip(")") for part in begin.split("; ")[2:]]
    assert taken == sorted(taken, key=int)
    assert begin.startswith(f"BEGIN; SELECT pg_advisory_xact_lock_shared({locks.STORE_KEY})")
    assert f"pg_advisory_xact_lock_shared({locks.key('cat')})" in begin
    assert locks.begin_postgres(None) == f"BEGIN; SELECT pg_advisory_xact_lock({locks.STORE_KEY})"
