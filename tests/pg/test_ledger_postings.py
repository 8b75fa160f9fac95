"""A claimed task's budget ledger writes on a real server (docs/budgets.md, "Workers"):
resources without a limit take no run lock — not reserved, their usage pending until the
run's owner posts it — and resources with a limit reserve and settle under the run's lock
as before, refused at their limit.

A real worker run's ledger holds, for ``processOutputBytes``, the sum of what its effects
measured (what an in-process SQLite run of the same workflow holds) and nothing pending; an
owner killed after a worker's outcome and before the posting leaves it to the next owner,
which posts it once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.core.records import Attempt
from agentctl.engine.effects import budget
from agentctl.engine.run.claimed_tasks import ClaimFence
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.errors import PersistenceError
from agentctl.ids import IdGenerator, SystemClock
from agentctl.signals import TaskFailure
from agentctl.store import claim_fences, locks
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import Store, StoreSettings, open_store
from agentctl.store.transitions import guarded_update
from tests.pg import test_task_claims
from tests.pg.backends import rows
from tests.pg.test_audit_lanes import _gate, _ran
from tests.pg.test_claim_fences import NOW, _claims, _spec
from tests.pg.test_statement_counts import _sent
from tests.pg.test_task_claims import _crash_and_recover, _detach
from tests.pg.test_workers import _ready, _stop, _worker

USED = "SELECT used_units, reserved_units FROM budgets WHERE run_id = ? AND resource = ?"
PENDING = "SELECT COUNT(*), COALESCE(SUM(units), 0) FROM budget_pending_usage WHERE run_id = ?"


@pytest.fixture
def impatient(postgres_url: str) -> Iterator[Store]:
    """A worker's store that gives up on a lock after 300 ms: a wait is ``store.locked``."""
    store = open_store(postgres_url, settings=StoreSettings(busy_timeout_ms=300))
    try:
        yield store
    finally:
        store.close()


def speaking(ledger: Path, items: int, concurrency: int = 64, budgets: str = "{}") -> str:
    """``items`` process steps that append their idempotency key to ``ledger`` (one line per
    execution in the world, as tests.pg.test_task_claims.fan_out) and print it too: each
    measures ``processOutputBytes``."""
    return f"""
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: fan-out}}
spec:
  runtime: {{maxConcurrency: {concurrency}, budgets: {budgets}}}
  policy: {{approval: never, processAllowlist: [sh]}}
  actions:
    append:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo $AGENTCTL_IDEMPOTENCY_KEY >> {ledger}; echo $AGENTCTL_IDEMPOTENCY_KEY"]
  tasks:
    - id: unit
      uses: action:append
      foreach: {{items: {list(range(items))}, maxItems: {items}}}
"""


def _run(url: str, tmp_path: Path, budgets: str = "{}") -> tuple[Store, str, list[str]]:
    """A store and a running run of one process step (``budgets``: its runtime.budgets)."""
    (tmp_path / "wf.yaml").write_text(speaking(tmp_path / "ledger.txt", 1, budgets=budgets))
    prepared = prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path))
    store = open_store(url)
    clock = SystemClock()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    with store.write() as conn:
        guarded_update(conn, "run", (run_id,), {"status": "running"})
    return store, run_id, ["unit[0]"]


def _shell(fence: ClaimFence, run_id: str, task_id: str, reserve: float, n: int = 0) -> Any:
    """A shell step's effect as builtin.shell.exec performs it: ``processOutputBytes``
    reserved, its output's bytes measured (seven)."""
    return asyncio.run(
        _gate(fence, run_id).perform(
            Attempt(run_id, task_id, n + 1),  # one attempt each: a fresh position
            _spec(n),
            _ran,
            reservation={"processOutputBytes": reserve},
            usage=lambda result: {"processOutputBytes": len(result["stdout"])},
        )
    )


def _used(url: str, run_id: str, resource: str = "processOutputBytes") -> tuple[float, float]:
    ((used, reserved),) = rows(url, USED, (run_id, resource))
    return float(used), float(reserved)


def test_an_unlimited_reservation_and_its_usage_commit_while_the_runs_lock_is_held(
    postgres_url: str, tmp_path: Path, impatient: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shell step's claimed effect (``processOutputBytes`` reserved, no limit) journals
    and finishes while another connection holds the run's advisory lock: no run lock, no
    ledger statement but the pending usage's insert (and the one read of the run's limits).
    ``inspect``'s ledger counts the pending usage at once; the owner's posting moves it
    into ``used_units`` once (a second posting adds nothing)."""
    store, run_id, tasks = _run(postgres_url, tmp_path)
    try:
        (claim,) = _claims(store, run_id, tasks)
        fence = ClaimFence(impatient, claim)
        with store.write(locks.run(run_id)), _sent(monkeypatch) as sent:
            assert _shell(fence, run_id, claim.task_id, 100)["exitCode"] == 0
        assert not [s for s in sent if "pg_advisory_xact_lock(" in s]
        assert not [s for s in sent if "UPDATE budgets" in s or "budget_reservations" in s]
        assert _used(postgres_url, run_id) == (0.0, 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(1, 7.0)]
        with store.read() as conn:
            shown = {row["resource"]: row["used"] for row in budget.snapshot(conn, run_id)}
        assert shown["processOutputBytes"] == 7
        with impatient.autocommit() as conn:
            claim_fences.finish_claim(conn, run_id, claim.task_id, claim.token, "{}", NOW)
        for _ in range(2):
            with store.write(locks.run(run_id)) as conn:
                repo.remove_claims(conn, run_id, tasks)
                budget.post_pending(conn, run_id, NOW)
        assert _used(postgres_url, run_id) == (7.0, 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
    finally:
        store.close()


def test_a_limited_resource_reserves_under_the_runs_lock_and_is_refused_at_its_limit(
    postgres_url: str, tmp_path: Path, impatient: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maxProcessOutputBytes`` set: a claimed effect waits for the run's lock to reserve
    (with another connection holding it, the impatient worker gives up: ``store.locked``);
    without it, it reserves and settles under the lock (two of them), nothing pending; a
    reservation past the limit is refused (``budget.exceeded``) and holds nothing."""
    store, run_id, tasks = _run(postgres_url, tmp_path, "{maxProcessOutputBytes: 150}")
    try:
        (claim,) = _claims(store, run_id, tasks)
        fence = ClaimFence(impatient, claim)
        with store.write(locks.run(run_id)), pytest.raises(PersistenceError) as waited:
            _shell(fence, run_id, claim.task_id, 100)
        assert waited.value.code == "store.locked"
        with _sent(monkeypatch) as sent:
            _shell(fence, run_id, claim.task_id, 100, n=1)
        assert sum("pg_advisory_xact_lock(" in s for s in sent) == 2  # reserve, settle
        assert _used(postgres_url, run_id) == (7.0, 0.0)
        assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
        assert rows(
            postgres_url, "SELECT status FROM budget_reservations WHERE run_id = ?", (run_id,)
        ) == [("settled",)]
        with pytest.raises(TaskFailure) as refused:
            _shell(fence, run_id, claim.task_id, 144, n=2)  # 7 + 144 > 150
        assert refused.value.code == "budget.exceeded"
        assert _used(postgres_url, run_id) == (7.0, 0.0)
    finally:
        store.close()


def _effect_bytes(url: str, run_id: str) -> float:
    """What the run's effects measured: their results' stdout and stderr bytes."""
    total = 0
    for (result,) in rows(url, "SELECT result_json FROM effects WHERE run_id = ?", (run_id,)):
        data = json.loads(str(result))
        total += len(str(data.get("stdout", "")).encode()) + len(
            str(data.get("stderr", "")).encode()
        )
    return float(total)


def test_a_worker_runs_ledger_holds_what_its_effects_measured_as_an_in_process_run_does(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Twelve process steps over two workers: the ledger's used ``processOutputBytes`` is
    the sum over the run's effects, nothing is pending, nothing reserved; the same
    workflow run in-process on SQLite has the same figure."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(speaking(tmp_path / "ledger.txt", 12, concurrency=12))
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
    measured = _effect_bytes(postgres_url, run_id)
    assert measured > 12 * 10  # every step printed its key
    assert _used(postgres_url, run_id) == (measured, 0.0)
    assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
    local = tmp_path / "local"
    local.mkdir()
    (local / "wf.yaml").write_text(speaking(tmp_path / "ledger2.txt", 12, concurrency=12))
    database = local / "state.db"
    ran = cli(
        "--output", "json", "roll", local / "wf.yaml", "--workspace", local, "--db", database
    )  # fmt: skip
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    local_run = str(ran.json()["data"]["runId"])
    shown = cli("--output", "json", "inspect", local_run, "--db", database)
    ledger = {row["resource"]: row["used"] for row in shown.json()["data"]["budget"]}
    assert ledger["processOutputBytes"] == measured


def test_an_owner_killed_after_a_workers_outcome_leaves_its_posting_to_the_next_owner(
    cli: Any, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's owner, also the worker of its tasks, is SIGKILLed on its second task right
    after that task's outcome committed (its usage pending, as the first task's: the owner
    posts a batch's when all of it is done) and before any posting: the next owner posts
    each effect's usage once — the ledger holds the sum over the effects, nothing pending."""
    monkeypatch.setattr(test_task_claims, "fan_out", speaking)
    run_id, _, _, waited = _crash_and_recover(cli, postgres_url, tmp_path, "effect.finished:2")
    assert waited.exit_code == 0, waited.stdout + waited.stderr
    measured = _effect_bytes(postgres_url, run_id)
    assert measured > 12 * 10
    assert _used(postgres_url, run_id) == (measured, 0.0)
    assert rows(postgres_url, PENDING, (run_id,)) == [(0, 0.0)]
