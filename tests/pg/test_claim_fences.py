"""A claimed task's writes on a real server: fenced by the claim's token, its run's lock taken
late (docs/postgresql.md, "Locks").

A worker's write of its own rows (the effect journal) goes on while another transaction
holds the run's lock; only an append to the run's audit chain (and the budget ledger) waits
for it, and holds it to the commit. The events here are appended to the chain by a
``RunLog`` without a lane, as anything but a claimed task's own events still is; the claimed
task's own events go to its lane without the lock (tests/pg/test_audit_lanes.py). A stale
claim's write is refused whatever it did before its lock, the owner withdrawing a claim
under its lock never waits in a circle with a worker, concurrent finishes keep one audit
chain per run, and a join after a fan-out spread over workers is started exactly once."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.core.records import RunLog
from agentctl.engine.effects import journal
from agentctl.engine.run.claimed_tasks import ClaimFence
from agentctl.errors import OwnershipLostError, PersistenceError
from agentctl.observability.audit import verify_chain
from agentctl.store import claim_fences, locks
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import Store, StoreSettings, open_store
from agentctl.store.states import EffectState
from tests.pg.backends import rows
from tests.pg.test_claim_slots import _running_run
from tests.pg.test_task_claims import _detach
from tests.pg.test_workers import _ready, _stop, _worker

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _claims(store: Store, run_id: str, tasks: list[str], lease: float = 60) -> list[Any]:
    """Publish ``tasks`` and claim each by a worker of its own (``w0``, ``w1``, …)."""
    with store.write() as conn:
        repo.publish(conn, run_id, [repo.Published(t, "basis", "{}") for t in tasks], NOW)
    claimed = []
    for n in range(len(tasks)):
        with store.write() as conn:
            (one,) = repo.claim_ready(conn, f"w{n}", NOW, 1, lease_seconds=lease)
        claimed.append(one)
    return claimed


def _spec(n: int) -> journal.EffectSpec:
    return journal.EffectSpec.classified("builtin.shell.exec", {"argv": ["true", str(n)]})


def _request(conn: Any, claim: Any, n: int = 0) -> str:
    """The gate's journal write of the claim's task's first effect (its own row)."""
    record, _ = journal.request_effect(
        conn,
        run_id=claim.run_id,
        task_id=claim.task_id,
        attempt=1,
        ordinal=1,
        spec=_spec(n),
        now=NOW,
    )
    return record.id


def _run_lock(url: str, run_id: str, *, granted: bool = True) -> int:
    """How many backends hold (``granted``) or wait for the run's advisory lock."""
    (name,) = locks.run(run_id).exclusive
    value = locks.key(name) & 0xFFFFFFFFFFFFFFFF
    found = rows(
        url,
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 "
        "AND classid::bigint = ? AND objid::bigint = ? AND granted = ?",
        (value >> 32, value & 0xFFFFFFFF, granted),
    )
    return int(found[0][0])


def _kinds(url: str, run_id: str) -> list[tuple[str, str | None]]:
    return [
        (str(kind), task)
        for kind, task in rows(
            url,
            "SELECT kind, task_id FROM audit_events WHERE run_id = ? AND kind LIKE 'test.%' "
            "ORDER BY seq",
            (run_id,),
        )
    ]


@pytest.fixture
def impatient(postgres_url: str) -> Iterator[Store]:
    """A second process's store that gives up on a lock after 300 ms: a wait shows as
    ``store.locked`` at once."""
    store = open_store(postgres_url, settings=StoreSettings(busy_timeout_ms=300))
    try:
        yield store
    finally:
        store.close()


def test_a_claimed_tasks_own_writes_do_not_wait_for_its_runs_lock(
    postgres_url: str, tmp_path: Path, impatient: Store
) -> None:
    """Two workers finishing two tasks of one run: A's write is open after its journal
    write (no run lock held) while B's whole write, chain append included, commits; then
    A holds the run's lock (after its chain append) while B moves its effect to
    ``started`` and records its outcome; only B's next chain append waits for A."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 2)
    log = RunLog(run_id, checkpoint_seq=0)
    try:
        a, b = _claims(store, run_id, tasks)
        fence_a, fence_b = ClaimFence(store, a), ClaimFence(impatient, b)
        with fence_a.write() as conn_a:
            _request(conn_a, a, 0)
            assert _run_lock(postgres_url, run_id) == 0  # its own row: no run lock yet
            with fence_b.write() as conn_b:
                effect_b = _request(conn_b, b, 1)
                log.event(conn_b, "test.requested", {}, now=NOW, task_id=b.task_id)
            log.event(conn_a, "test.requested", {}, now=NOW, task_id=a.task_id)
            assert _run_lock(postgres_url, run_id) == 1  # from the chain append on
            with fence_b.row_write() as conn:
                journal.set_status(conn, effect_b, EffectState.STARTED, NOW)
            with impatient.autocommit() as conn:
                claim_fences.finish_claim(conn, run_id, b.task_id, b.token, '{"by": "B"}', NOW)
            with pytest.raises(PersistenceError) as waited, fence_b.write() as conn:
                journal.finish_effect(
                    conn, effect_b, status=EffectState.SUCCEEDED, now=NOW, confirmed=True
                )
                log.event(conn, "test.succeeded", {}, now=NOW, task_id=b.task_id)
            assert waited.value.code == "store.locked"
        assert rows(postgres_url, "SELECT status FROM effects WHERE id = ?", (effect_b,)) == [
            ("started",)  # the refused write's effect update rolled back with it
        ]
        assert _kinds(postgres_url, run_id) == [
            ("test.requested", b.task_id),
            ("test.requested", a.task_id),
        ]
        with store.read() as conn:
            assert verify_chain(conn, run_id).ok
    finally:
        store.close()


def test_a_stale_claims_write_is_refused_and_nothing_of_it_lands(
    postgres_url: str, tmp_path: Path
) -> None:
    """A's lease ran out and B claimed the task: A's write is refused when it takes the
    run's lock (its fence is checked right after), and a write of A's that needed no run
    lock is refused before its commit; neither leaves a row. B's writes land."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    log = RunLog(run_id, checkpoint_seq=0)
    try:
        (stale,) = _claims(store, run_id, tasks, lease=1)
        with store.write() as conn:
            (holder,) = repo.claim_ready(conn, "B", NOW + timedelta(seconds=2), 1, 60)
        assert holder.token == stale.token + 1
        with pytest.raises(OwnershipLostError, match="fencing token"):
            with ClaimFence(store, stale).write() as conn:
                _request(conn, stale)
                log.event(conn, "test.by_a", {}, now=NOW, task_id=stale.task_id)
        with pytest.raises(OwnershipLostError, match="fencing token"):
            with ClaimFence(store, stale).write() as conn:
                _request(conn, stale)
        assert rows(postgres_url, "SELECT COUNT(*) FROM effects WHERE run_id = ?", (run_id,)) == [
            (0,)
        ]
        with ClaimFence(store, holder).write() as conn:
            _request(conn, holder)
            log.event(conn, "test.by_b", {}, now=NOW, task_id=holder.task_id)
        assert [k for k, _ in _kinds(postgres_url, run_id)] == ["test.by_b"]
        assert rows(postgres_url, "SELECT COUNT(*) FROM effects WHERE run_id = ?", (run_id,)) == [
            (1,)
        ]
    finally:
        store.close()


def test_the_owner_withdraws_a_claim_while_a_workers_write_is_open_and_neither_deadlocks(
    postgres_url: str, tmp_path: Path, impatient: Store
) -> None:
    """The owner's writes hold the run's lock from their BEGIN and may delete claim rows;
    a worker's write locks its claim's row only after the run's lock. So the owner's
    withdrawal does not wait for a worker's open write (it holds no claim row), and a
    worker whose chain append waits for the owner's lock finds its claim gone: refused,
    never a deadlock."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 2)
    log = RunLog(run_id, checkpoint_seq=0)
    try:
        first, second = _claims(store, run_id, tasks)
        with pytest.raises(OwnershipLostError), ClaimFence(store, first).write() as conn:
            _request(conn, first)
            # The owner (a 300 ms lock timeout: it would fail if it waited) withdraws it.
            with impatient.write(locks.run(run_id)) as owner:
                repo.remove_claims(owner, run_id, [first.task_id])
            log.event(conn, "test.by_first", {}, now=NOW, task_id=first.task_id)
    except BaseException:
        store.close()
        raise
    # The other order: the owner holds the run's lock and withdraws; the worker's chain
    # append waits for it, then finds its claim gone.
    refused: list[BaseException] = []

    def append() -> None:
        try:
            with ClaimFence(store, second).write() as conn:
                _request(conn, second)
                log.event(conn, "test.by_second", {}, now=NOW, task_id=second.task_id)
        except BaseException as exc:  # noqa: BLE001 - checked below
            refused.append(exc)

    try:
        with store.write(locks.run(run_id)) as owner:
            repo.remove_claims(owner, run_id, [second.task_id])
            worker = threading.Thread(target=append)
            worker.start()
            while _run_lock(postgres_url, run_id, granted=False) == 0:  # until it waits
                assert worker.is_alive(), refused
                worker.join(timeout=0.01)
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert len(refused) == 1 and isinstance(refused[0], OwnershipLostError), refused
        assert _kinds(postgres_url, run_id) == []
        assert rows(postgres_url, "SELECT COUNT(*) FROM effects WHERE run_id = ?", (run_id,)) == [
            (0,)
        ]
    finally:
        store.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_finishes_of_one_runs_tasks_keep_one_chain_and_count_once(
    postgres_url: str, tmp_path: Path, seed: int
) -> None:
    """Six workers finish six tasks of one run at once, each through the gate's three
    transactions and the outcome, with random pauses (a seeded interleaving): the run's
    chain stays one chain (every append saw the previous head), every outcome is counted
    once, and the owner's count reaches all of them exactly when the last one commits."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 6)
    log = RunLog(run_id, checkpoint_seq=0)
    pauses = random.Random(seed)
    plan = {t: [pauses.uniform(0, 0.02) for _ in range(4)] for t in tasks}
    start = threading.Barrier(len(tasks))
    failures: list[BaseException] = []
    seen_all: list[int] = []
    counted = threading.Lock()

    def finish(claim: Any, n: int) -> None:
        wait = plan[claim.task_id]
        try:
            fence = ClaimFence(store, claim)
            start.wait()
            threading.Event().wait(wait[0])
            with fence.write() as conn:
                effect = _request(conn, claim, n)
                log.event(conn, "test.requested", {}, now=NOW, task_id=claim.task_id)
            with fence.row_write() as conn:
                journal.set_status(conn, effect, EffectState.STARTED, NOW)
            threading.Event().wait(wait[1])
            with fence.write() as conn:
                journal.finish_effect(
                    conn, effect, status=EffectState.SUCCEEDED, now=NOW, confirmed=True
                )
                threading.Event().wait(wait[2])  # between its own row and the chain
                log.event(conn, "test.succeeded", {}, now=NOW, task_id=claim.task_id)
            threading.Event().wait(wait[3])
            with counted:
                with store.autocommit() as conn:
                    claim_fences.finish_claim(conn, run_id, claim.task_id, claim.token, "{}", NOW)
                with store.read_one() as conn:
                    total, done = repo.claims_done(conn, run_id, tasks)
                if done == total:
                    seen_all.append(n)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    try:
        claims = _claims(store, run_id, tasks)
        threads = [threading.Thread(target=finish, args=(c, n)) for n, c in enumerate(claims)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failures == []
        assert len(seen_all) == 1  # the last outcome, and only it, completes the batch
        kinds = _kinds(postgres_url, run_id)
        assert sorted(kinds) == sorted(
            (kind, t) for t in tasks for kind in ("test.requested", "test.succeeded")
        )
        for task in tasks:  # each task's own events in its order
            assert [k for k, t in kinds if t == task] == ["test.requested", "test.succeeded"]
        ordered = "SELECT seq FROM audit_events WHERE run_id = ? ORDER BY seq"
        seqs = [int(r[0]) for r in rows(postgres_url, ordered, (run_id,))]
        assert seqs == list(range(1, len(seqs) + 1))
        with store.read() as conn:
            assert verify_chain(conn, run_id).ok
    finally:
        store.close()


def _fan_out_and_join(ledger: Path, items: int) -> str:
    """``items`` process steps and a join that needs them all; each appends a line."""
    return f"""
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: fan-out-join}}
spec:
  runtime: {{maxConcurrency: {items}}}
  policy: {{approval: never, processAllowlist: [sh]}}
  actions:
    append:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "sleep 0.0$(( $$ % 5 )); echo unit $AGENTCTL_IDEMPOTENCY_KEY >> {ledger}"]
    join:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo join $AGENTCTL_IDEMPOTENCY_KEY >> {ledger}"]
  tasks:
    - id: unit
      uses: action:append
      foreach: {{items: {list(range(items))}, maxItems: {items}}}
    - id: together
      uses: action:join
      needs: [unit]
"""


@pytest.mark.slow
@pytest.mark.parametrize(("items", "workers", "slots"), [(6, 3, 2), (5, 2, 3)])
def test_a_join_after_a_fan_out_over_workers_starts_exactly_once(
    cli: Any, postgres_url: str, tmp_path: Path, items: int, workers: int, slots: int
) -> None:
    """The fan-out's tasks finish concurrently on several workers (their outcomes race
    each other); the join that needs them all runs once, after every one of them."""
    ws = tmp_path / "ws"
    ws.mkdir()
    ledger = tmp_path / "ledger.txt"
    (ws / "wf.yaml").write_text(_fan_out_and_join(ledger, items))
    started = [
        _worker(postgres_url, ws, f"w{n}", "--concurrency", str(slots)) for n in range(workers)
    ]
    try:
        for worker in started:
            _ready(worker)
        run_id = _detach(cli, postgres_url, ws)
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 0, waited.stdout + waited.stderr
    finally:
        for worker in started:
            _stop(worker)
    lines = (ledger.read_text()).splitlines()
    units = [line for line in lines if line.startswith("unit ")]
    joins = [line for line in lines if line.startswith("join ")]
    assert len(units) == items and len(set(units)) == items
    assert len(joins) == 1 and lines[-1] == joins[0]  # once, after every unit
    assert rows(
        postgres_url,
        "SELECT attempt, status FROM tasks WHERE run_id = ? AND task_id = 'together'",
        (run_id,),
    ) == [(1, "succeeded")]
    assert rows(
        postgres_url,
        "SELECT COUNT(*) FROM effects WHERE run_id = ? AND task_id = 'together'",
        (run_id,),
    ) == [(1,)]
    assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0
