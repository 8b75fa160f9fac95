"""Per-run locks on a real server (docs/postgresql.md, "Locks"): a write of one run never
waits for another run's write, two writes of one run are serialised, the fence is exact,
and a write that names no scope still has the whole store to itself."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.scheduled_runs import RunLauncher
from agentctl.errors import OwnershipLostError, PersistenceError
from agentctl.ids import IdGenerator, SystemClock
from agentctl.scheduling.daemon import fire_now
from agentctl.scheduling.schedules import Schedule, add_schedule
from agentctl.store import locks, ownership, run_queue, schedules_repo
from agentctl.store.engine import Store, StoreSettings, open_store
from tests.pg.backends import postgres_text
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
                postgres_text(
                    "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json, "
                    "status, created_at, updated_at) VALUES (?, 'wf', 'a', 'b', '{}', 'running', "
                    "?, ?)"
                ),
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
        postgres_text("UPDATE runs SET reason = ? WHERE id = ?"), (reason, run_id)
    )


def _reason(store: Store, run_id: str) -> str | None:
    with store.read() as conn:
        row = conn.exec_driver_sql(
            postgres_text("SELECT reason FROM runs WHERE id = ?"), (run_id,)
        ).first()
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


WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: created-beside}
spec:
  actions:
    set: {kind: builtin.assign}
  tasks:
    - {id: one, uses: action:set, with: {value: 1}}
"""


def test_a_run_is_created_while_another_runs_write_is_open(
    stores: tuple[Store, Store], tmp_path: Path
) -> None:
    """Creating a run writes only that run's rows, so it takes only the new run's lock: it
    commits while a write of another run is held open (before, it took the whole store and
    waited). A creation that decides on other rows (a guard) still takes the whole store."""
    first, second = stores
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WORKFLOW)
    prepared = prepare_run(str(workflow), workspace=str(tmp_path))
    clock = SystemClock()
    with first.write(locks.run("run-a")) as held:
        _touch(held, "run-a", "held while a run is created")
        created = create_run(second, prepared, clock=clock, ids=IdGenerator(clock))
        with pytest.raises(PersistenceError) as guarded:
            create_run(
                second, prepared, clock=clock, ids=IdGenerator(clock), guard=lambda conn: None
            )
        assert guarded.value.code == "store.locked"
    with second.read() as conn:
        row = conn.exec_driver_sql(
            postgres_text("SELECT status FROM runs WHERE id = ?"), (created,)
        ).first()
    assert row is not None and row[0] == "running"


def test_a_schedule_fires_while_another_runs_write_is_open(
    stores: tuple[Store, Store], tmp_path: Path
) -> None:
    """A firing (record the slot, create the run, link them) takes the schedule's lock and
    the new run's: it commits while a run's write is held open, and still waits for a
    write that holds the whole store."""
    first, second = stores
    workflow = tmp_path / "workflows" / "created-beside.yaml"
    workflow.parent.mkdir()
    workflow.write_text(WORKFLOW)
    now = datetime.now(UTC)
    new = Schedule(
        name="nightly",
        workflow="created-beside",
        workflow_file=str(workflow),
        project_dir=str(tmp_path),
        workspace=str(tmp_path),
        cron=None,
        interval_seconds=3600,
        timezone="UTC",
        inputs_json="{}",
        catch_up="skip",
        max_catch_up=1,
        overlap="allow",
        jitter_seconds=0,
        grace_seconds=60,
        anchor_at=now,
        cursor_at=now,
        created_at=now,
        updated_at=now,
    )
    add_schedule(second, new, now=now)
    launcher = RunLauncher(second, SystemClock())
    with first.write(locks.run("run-a")) as held:
        _touch(held, "run-a", "held while a schedule fires")
        run_id = fire_now(second, "nightly", now, launcher)
    with second.read() as conn:
        linked = schedules_repo.firings(conn, "nightly", 5)
    assert [f.run_id for f in linked] == [run_id]
    with first.write(), pytest.raises(PersistenceError) as whole:
        fire_now(second, "nightly", now + timedelta(seconds=1), launcher)
    assert whole.value.code == "store.locked"
