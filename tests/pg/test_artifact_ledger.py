"""A claimed task's artifact bytes on a real server (docs/budgets.md, "Workers"): without a
``maxArtifactBytes`` limit the worker takes no run lock for them — not reserved, the bytes
pending until the run's owner posts them — and with one they reserve and settle under the
run's lock as before, refused at the limit.

A real worker run's ledger holds, for ``artifactBytes``, the bytes of the files its tasks
wrote (what an in-process SQLite run of the same workflow holds) and nothing pending."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.engine.effects import budget
from agentctl.engine.run.claimed_tasks import ClaimFence, RunSnapshots, execute_claimed
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.run.outcome import ExecutionOptions
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import locks
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import Store, StoreSettings, open_store
from agentctl.store.transitions import guarded_update
from tests.pg.backends import rows
from tests.pg.test_statement_counts import _sent
from tests.pg.test_task_claims import _detach
from tests.pg.test_workers import _ready, _stop, _worker

USED = "SELECT used_units, reserved_units FROM budgets WHERE run_id = ? AND resource = ?"
PENDING = (
    "SELECT COUNT(*), COALESCE(SUM(units), 0) FROM budget_pending_usage "
    "WHERE run_id = ? AND resource = 'artifactBytes'"
)
TEXT = "twelve bytes"  # what each task writes


def writing(tasks: int, budgets: str = "{}") -> str:
    """``tasks`` independent steps, each writing ``TEXT`` to a file of its own (an
    artifact of the task: its bytes count against ``maxArtifactBytes``)."""
    steps = "".join(
        f"""
    - id: t{n}
      uses: action:save
      with: {{path: out/t{n}.txt, content: "{TEXT}"}}"""
        for n in range(tasks)
    )
    return f"""
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: artifact-bytes}}
spec:
  runtime: {{maxConcurrency: {tasks}, budgets: {budgets}}}
  policy: {{approval: never, writableRoots: [out]}}
  actions:
    save: {{kind: builtin.write}}
  tasks:{steps}
"""


@pytest.fixture
def impatient(postgres_url: str) -> Iterator[Store]:
    """A worker's store that gives up on a lock after 300 ms: a wait is ``store.locked``."""
    store = open_store(postgres_url, settings=StoreSettings(busy_timeout_ms=300))
    try:
        yield store
    finally:
        store.close()


def _run(url: str, tmp_path: Path, tasks: int, budgets: str = "{}") -> tuple[Store, str]:
    """A store and a running run of ``tasks`` writing steps (its runtime.budgets)."""
    (tmp_path / "wf.yaml").write_text(writing(tasks, budgets))
    prepared = prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path))
    store = open_store(url)
    clock = SystemClock()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    with store.write() as conn:
        guarded_update(conn, "run", (run_id,), {"status": "running"})
    return store, run_id


def _claim(store: Store, run_id: str, tasks: list[str]) -> list[Any]:
    """Publish ``tasks`` (as the run's owner does) and claim them all for one worker."""
    clock = SystemClock()
    with store.write() as conn:
        published = [repo.Published(t, "basis", '{"vars": {}}') for t in tasks]
        repo.publish(conn, run_id, published, clock.now())
        return repo.claim_ready(conn, "w1", clock.now(), len(tasks), lease_seconds=60)


def _execute(worker: Store, claim: Any, tmp_path: Path) -> str:
    """Execute one claimed task as a worker does (its run's snapshot read first)."""
    snapshots = RunSnapshots(worker)
    snapshots.get(claim)
    options = ExecutionOptions(cancel_poll_seconds=3600, workspace=str(tmp_path))
    clock = SystemClock()
    return asyncio.run(execute_claimed(worker, claim, snapshots, clock=clock, options=options))


def _used(url: str, run_id: str) -> tuple[float, float]:
    ((used, reserved),) = rows(url, USED, (run_id, "artifactBytes"))
    return float(used), float(reserved)


def _outcome(url: str, run_id: str, task_id: str) -> str:
    found = "SELECT state, outcome_json FROM task_claims WHERE run_id = ? AND task_id = ?"
    ((state, outcome),) = rows(url, found, (run_id, task_id))
    assert state == "done"
    return str(outcome)


def test_unlimited_artifact_bytes_are_pending_and_take_no_run_lock(
    postgres_url: str, tmp_path: Path, impatient: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``maxArtifactBytes``: a claimed task that writes a file executes to its outcome
    while another connection holds the run's lock (the worker would give up on it after
    300 ms): no ``pg_advisory_xact_lock`` at all, nothing reserved, the file's bytes
    pending. ``inspect``'s ledger counts them at once; the owner's posting moves them into
    ``used_units`` once. (The artifact's reservation and settling took the run's lock.)"""
    store, run_id = _run(postgres_url, tmp_path, 1)
    try:
        (claim,) = _claim(store, run_id, ["t0"])
        with store.write(locks.run(run_id)), _sent(monkeypatch) as sent:
            assert _execute(impatient, claim, tmp_path) == "done"
        assert '"succeeded"' in _outcome(postgres_url, run_id, "t0")
        written = float((tmp_path / "out" / "t0.txt").stat().st_size)
        assert written == len(TEXT)
        assert not [s for s in sent if "pg_advisory_xact_lock(" in s]
        assert not [s for s in sent if "UPDATE budgets" in s or "budget_reservations" in s]
        assert _used(postgres_url, run_id) == (0.0, 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(1, written)]
        with store.read() as conn:
            shown = {row["resource"]: row["used"] for row in budget.snapshot(conn, run_id)}
        assert shown["artifactBytes"] == written
        for _ in range(2):
            with store.write(locks.run(run_id)) as conn:
                repo.remove_claims(conn, run_id, ["t0"])
                budget.post_pending(conn, run_id, claim.started_at)
        assert _used(postgres_url, run_id) == (written, 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
    finally:
        store.close()


def test_limited_artifact_bytes_reserve_under_the_runs_lock_and_are_refused_at_the_limit(
    postgres_url: str, tmp_path: Path, impatient: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maxArtifactBytes: 20``: the first claimed task's twelve bytes reserve and settle
    in one transaction under the run's lock (one ``pg_advisory_xact_lock``), nothing
    pending; the second's would make 24: refused (``budget.exceeded``), nothing more
    counted or held."""
    store, run_id = _run(postgres_url, tmp_path, 2, "{maxArtifactBytes: 20}")
    try:
        first, second = sorted(_claim(store, run_id, ["t0", "t1"]), key=lambda c: c.task_id)
        with _sent(monkeypatch) as sent:
            assert _execute(impatient, first, tmp_path) == "done"
        assert '"succeeded"' in _outcome(postgres_url, run_id, "t0")
        assert sum("pg_advisory_xact_lock(" in s for s in sent) == 1
        assert _used(postgres_url, run_id) == (len(TEXT), 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
        assert _execute(impatient, second, tmp_path) == "done"
        assert "budget.exceeded" in _outcome(postgres_url, run_id, "t1")
        assert _used(postgres_url, run_id) == (len(TEXT), 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
        held = "SELECT status, units FROM budget_reservations WHERE run_id = ?"
        assert rows(postgres_url, held, (run_id,)) == [("settled", len(TEXT))]
    finally:
        store.close()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    limit=st.one_of(st.none(), st.integers(1, 60)),
    charges=st.lists(st.tuples(st.booleans(), st.integers(0, 30)), min_size=1, max_size=6),
)
def test_artifact_charges_of_workers_and_owner_follow_the_ledgers_rule(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    limit: int | None,
    charges: list[tuple[bool, int]],
) -> None:
    """Any sequence of artifact charges, each a worker's (through its claim's fence) or the
    owner's (under the run's lock from ``BEGIN``), with or without ``maxArtifactBytes``: a
    charge is refused exactly when the run has a limit and the bytes counted so far plus
    its own pass it; a worker's charge takes the run's lock only when there is a limit
    (once); the ledger shows every accepted byte at once (used plus pending), and after
    the owner's posting holds them all as used, nothing reserved or pending."""
    budgets = "{}" if limit is None else f"{{maxArtifactBytes: {limit}}}"
    store, run_id = _run(postgres_url, tmp_path, 1, budgets)
    try:
        (claim,) = _claim(store, run_id, ["t0"])
        fence = ClaimFence(store, claim)
        counted = 0
        for n, (claimed, size) in enumerate(charges):
            now = claim.started_at
            units = {"artifactBytes": float(size)}
            key = f"artifacts:t0:{n}"
            with _sent(monkeypatch) as sent:
                writer = fence.write() if claimed else store.write(locks.run(run_id))
                with writer as conn:
                    denied = budget.charge(conn, run_id, key, units, now, claimed=claimed)
            refused = limit is not None and counted + size > limit
            assert (denied is not None) == refused, (counted, size, limit)
            counted += 0 if refused else size
            if claimed:
                lock = sum("pg_advisory_xact_lock(" in s for s in sent)
                assert lock == (0 if limit is None else 1)
        with store.read() as conn:
            shown = {row["resource"]: row for row in budget.snapshot(conn, run_id)}
        assert (shown["artifactBytes"]["used"], shown["artifactBytes"]["reserved"]) == (counted, 0)
        with store.write(locks.run(run_id)) as conn:
            budget.post_pending(conn, run_id, claim.started_at)
        assert _used(postgres_url, run_id) == (counted, 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
    finally:
        store.close()


def test_a_worker_runs_artifact_bytes_are_what_its_tasks_wrote_as_in_process(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Six writing steps over two workers, no limit: the ledger's used ``artifactBytes``
    are the bytes of the six files (the owner posted every worker's), nothing pending or
    reserved; the same workflow run in-process on SQLite has the same figure."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(writing(6))
    workers = [_worker(postgres_url, ws, name) for name in ("w1", "w2")]
    try:
        for worker in workers:
            _ready(worker)
        run_id = _detach(cli, postgres_url, ws)
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 0, waited.stdout + waited.stderr
    finally:
        for worker in workers:
            _stop(worker)
    written = float(sum(path.stat().st_size for path in (ws / "out").glob("t*.txt")))
    assert written == 6 * len(TEXT)
    assert _used(postgres_url, run_id) == (written, 0.0)
    assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
    local = tmp_path / "local"
    local.mkdir()
    (local / "wf.yaml").write_text(writing(6))
    database = local / "state.db"
    ran = cli(
        "--output", "json", "roll", local / "wf.yaml", "--workspace", local, "--db", database
    )  # fmt: skip
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    shown = cli("--output", "json", "inspect", str(ran.json()["data"]["runId"]), "--db", database)
    ledger = {row["resource"]: row["used"] for row in shown.json()["data"]["budget"]}
    assert ledger["artifactBytes"] == written
