"""What a worker reads to execute a claimed task: the records of the owner's current batch,
once per state of the run, never the whole plan or every task row."""

from __future__ import annotations

from pathlib import Path

from agentctl.engine.core.records import checkpoint_checksum
from agentctl.engine.effects import budget, journal
from agentctl.engine.run.claimed_tasks import RunSnapshots
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import task_claims_repo
from agentctl.store.engine import open_store
from agentctl.store.transitions import guarded_update
from tests.pg.backends import execute, postgres_text


def _workflow(items: int) -> str:
    return f"""apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: snapshots}}
spec:
  runtime: {{maxConcurrency: 8}}
  policy: {{approval: never, processAllowlist: [echo]}}
  actions:
    say: {{kind: builtin.shell.exec, command: echo, args: ["hi"]}}
    step: {{kind: builtin.assign}}
  tasks:
    - id: first
      uses: action:say
    - id: unit
      uses: action:say
      needs: [first]
      foreach: {{items: {list(range(items))}, maxItems: {items}}}
    - id: join
      uses: action:step
      needs: [unit]
      with: {{items: "${{{{ tasks.unit.output.items }}}}"}}
"""


def test_a_claimed_task_reads_its_batch_once_and_not_the_whole_run(
    postgres_url: str, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(_workflow(40))
    prepared = prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path))
    store = open_store(postgres_url)
    clock = SystemClock()
    try:
        run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
        with store.write() as conn:
            guarded_update(conn, "run", (run_id,), {"status": "running"})
            task_ids = [
                str(row[0])
                for row in conn.exec_driver_sql(
                    postgres_text(
                        "SELECT task_id FROM plan_tasks WHERE run_id = ? ORDER BY ordinal"
                    ),
                    (run_id,),
                )
            ]
            units = [t for t in task_ids if t.startswith("unit") and t != "unit"]
            batch = units[:8]
            task_claims_repo.publish(
                conn,
                run_id,
                [task_claims_repo.Published(t, "basis", '{"vars": {}}') for t in batch],
                clock.now(),
            )
            claimed = task_claims_repo.claim_ready(conn, "w1", clock.now(), 8, 30.0)
        assert sorted(c.task_id for c in claimed) == sorted(batch)
        snapshots = RunSnapshots(store)
        assert snapshots.cached(claimed[0]) is None  # nothing read yet
        snapshot = snapshots.get(claimed[0])

        # The batch's records and the rows they read; nothing of the rest of the run.
        assert all(snapshot.plan.holds(t) for t in batch)
        assert not snapshot.plan.holds(units[-1]) and not snapshot.plan.holds("join")
        assert snapshot.rows.holds([*batch, "first"])
        assert not snapshot.rows.holds([units[-1]])
        # The other tasks of the batch are executed with what was read: no read at all.
        assert all(snapshots.cached(c) is snapshot for c in claimed[1:])

        # The owner committed since (a checkpoint was added): the next claim carries the
        # new key, so the cached state is not used for it.
        delta = '{"seen": 1}'
        execute(
            postgres_url,
            "INSERT INTO checkpoints (run_id, seq, format_version, transition, "
            "memory_delta_json, is_snapshot, checksum, created_at) "
            "SELECT ?, 1 + COALESCE(MAX(seq), 0), 1, 't', ?, 0, ?, r.created_at "
            "FROM runs r LEFT JOIN checkpoints c ON c.run_id = r.id WHERE r.id = ? "
            "GROUP BY r.created_at",
            (run_id, delta, checkpoint_checksum("t", delta), run_id),
        )
        with store.write() as conn:
            task_claims_repo.publish(
                conn,
                run_id,
                [task_claims_repo.Published(units[8], "basis", '{"vars": {}}')],
                clock.now(),
            )
            later = task_claims_repo.claim_ready(conn, "w1", clock.now(), 8, 30.0)
        assert [c.task_id for c in later] == [units[8]]
        assert later[0].snapshot_key != claimed[0].snapshot_key
        assert snapshots.cached(later[0]) is None
        # Brought up to date: the same plan records, the memory advanced by the new
        # checkpoint, the rows read again.
        updated = snapshots.get(later[0])
        assert updated.plan is snapshot.plan
        assert updated.memory == {**snapshot.memory, "seen": 1}
        assert updated.rows is not snapshot.rows and updated.rows.holds([units[8], "first"])
    finally:
        store.close()


def test_a_journaled_effect_is_returned_as_it_reads_back_on_both_backends(
    database: str, tmp_path: Path
) -> None:
    """The record ``insert_requested`` returns is built from what it inserted (a worker
    saves the read-back round trip): it must be exactly the stored row."""
    (tmp_path / "wf.yaml").write_text(_workflow(2))
    prepared = prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path))
    store = open_store(database)
    clock = SystemClock()
    try:
        run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
        spec = journal.EffectSpec.classified(
            "builtin.shell.exec", {"command": "echo", "args": ["hi", 1.5, None]}
        )
        with store.write() as conn:
            returned = journal.insert_requested(
                conn, run_id=run_id, task_id="first", attempt=1, ordinal=1, spec=spec,
                now=clock.now(),
            )  # fmt: skip
        with store.read() as conn:
            stored = journal.get_effect(conn, returned.id)
        assert stored is not None
        assert returned == stored and returned.to_json() == stored.to_json()
        assert returned.status == "requested" and returned.confirmed is False
    finally:
        store.close()


def test_an_effect_reserving_several_resources_leaves_the_ledger_exact_on_both_backends(
    database: str, tmp_path: Path
) -> None:
    """A model call reserves and uses several resources; the ledger rows of all of them
    change in one statement each (fewer round trips for a worker), with the same result
    as one statement per resource."""
    (tmp_path / "wf.yaml").write_text(_workflow(2))
    prepared = prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path))
    store = open_store(database)
    clock = SystemClock()
    try:
        run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
        worst = {"providerRequests": 1, "inputTokens": 1200.5, "outputTokens": 512, "turns": 0}
        with store.write() as conn:
            assert budget.reserve(conn, run_id, "effect-1", worst, clock.now()) is None
            # Journaled twice (a resume of a requested effect): held once, not twice.
            assert budget.reserve(conn, run_id, "effect-1", worst, clock.now()) is None
        with store.read() as conn:
            held = {r["resource"]: r["reserved"] for r in budget.snapshot(conn, run_id)}
        assert held["providerRequests"] == 1 and held["inputTokens"] == 1200.5
        assert held["outputTokens"] == 512 and held["turns"] == 0 and held["toolCalls"] == 0
        actual = {"providerRequests": 1, "inputTokens": 300.25, "outputTokens": 40, "turns": 1}
        with store.write() as conn:
            assert budget.settle(conn, run_id, "effect-1", actual, clock.now()) == []
        with store.read() as conn:
            rows = {
                r["resource"]: (r["reserved"], r["used"]) for r in budget.snapshot(conn, run_id)
            }
        assert rows["providerRequests"] == (0, 1) and rows["inputTokens"] == (0, 300.25)
        assert rows["outputTokens"] == (0, 40) and rows["turns"] == (0, 1)
        assert rows["toolCalls"] == (0, 0)
    finally:
        store.close()


def test_a_claimed_tasks_write_to_an_unreachable_server_is_a_store_error() -> None:
    """A claimed task writes through driver-level sessions: a server that cannot be reached
    is the store's transient `store.unreachable` (retried for an effect's outcome), not a
    driver exception escaping the worker."""
    import socket

    import pytest

    from agentctl.errors import PersistenceError
    from agentctl.store.engine import Store, StoreSettings
    from agentctl.store.postgres import make_engine

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once the probe is closed
    store = Store(make_engine(f"postgresql://agentctl@127.0.0.1:{port}/none", StoreSettings()), "x")
    try:
        with pytest.raises(PersistenceError) as raised, store.driver_session():
            pass
        assert raised.value.code == "store.unreachable"
    finally:
        store.close()
