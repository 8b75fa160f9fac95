"""A claimed task's audit events on a real server: they go to its claim's lane without the
run's lock, and the run's owner adopts the lanes into the chain (docs/durable-execution.md,
"Audit lanes").

The effect gate's two transactions of a claimed task (``requested``, its outcome) commit
while another connection holds the run's advisory lock, when the effect reserves nothing
(a reservation of a resource with a limit still takes the lock: test_ledger_postings.py).
A real worker run leaves a chain that verifies and holds every effect event once, before
its task's transition, and no lane. A lane edited in the database is refused by the
adoption and by ``audit --verify``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.core.faults import Faults
from agentctl.engine.core.records import Attempt, RunLog
from agentctl.engine.effects.gate import EffectGate
from agentctl.engine.run.claimed_tasks import ClaimFence
from agentctl.errors import PersistenceError
from agentctl.ids import SystemClock
from agentctl.observability import audit_lanes
from agentctl.observability.audit import list_events, verify_chain
from agentctl.store import claim_fences, locks
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import Store, StoreSettings, open_store
from tests.pg.backends import execute, rows
from tests.pg.test_claim_fences import NOW, _claims, _spec
from tests.pg.test_claim_slots import _running_run
from tests.pg.test_statement_counts import _sent
from tests.pg.test_task_claims import _crash_and_recover, _detach, fan_out
from tests.pg.test_workers import _ready, _stop, _worker

POLICY = {"approval": "never", "processAllowlist": ["true"]}


@pytest.fixture
def impatient(postgres_url: str) -> Iterator[Store]:
    """A worker's store that gives up on a lock after 300 ms: a wait is ``store.locked``."""
    store = open_store(postgres_url, settings=StoreSettings(busy_timeout_ms=300))
    try:
        yield store
    finally:
        store.close()


def _gate(fence: ClaimFence, run_id: str) -> EffectGate:
    """The gate of a claimed task as a worker builds it (its RunLog writes the lane)."""
    log = RunLog(run_id, checkpoint_seq=0, lane=fence.lane)
    return EffectGate(fence, log, SystemClock(), policy=POLICY, faults=Faults(""))


async def _ran(_: str) -> dict[str, Any]:
    return {"exitCode": 0, "stdout": "x" * 7}


def _lane_kinds(url: str, run_id: str) -> list[str]:
    return [
        str(r[0])
        for r in rows(
            url,
            "SELECT kind FROM audit_lane_events WHERE run_id = ? ORDER BY claim_token, lane_seq",
            (run_id,),
        )
    ]


def _adopt(store: Store, run_id: str, task_ids: list[str]) -> int:
    """The owner's removal of its batch's claims, with the adoption it makes."""
    with store.write(locks.run(run_id)) as conn:
        repo.remove_claims(conn, run_id, task_ids)
        return audit_lanes.adopt_lanes(conn, run_id)


def test_a_claimed_effect_without_reservation_commits_while_the_runs_lock_is_held(
    postgres_url: str, tmp_path: Path, impatient: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds the run's advisory lock throughout: the effect's
    ``requested`` and outcome transactions (and its move to ``started``) commit all the
    same (the worker gives up on a lock after 300 ms), their events in the claim's lane and
    no ledger statement sent (nothing reserved, no usage). The owner adopts the lane."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    try:
        (claim,) = _claims(store, run_id, tasks)
        fence = ClaimFence(impatient, claim)
        attempt = Attempt(run_id, claim.task_id, 1)
        with store.write(locks.run(run_id)), _sent(monkeypatch) as sent:
            result = asyncio.run(_gate(fence, run_id).perform(attempt, _spec(0), _ran))
        assert result["exitCode"] == 0
        assert _lane_kinds(postgres_url, run_id) == ["effect.requested", "effect.succeeded"]
        worker = [s for s in sent if "pg_advisory_xact_lock(" in s or "budget" in s]
        assert worker == [], worker  # neither the run's lock nor the ledger
        with impatient.autocommit() as conn:
            claim_fences.finish_claim(conn, run_id, claim.task_id, claim.token, "{}", NOW)
        assert _adopt(store, run_id, tasks) == 2
        assert _lane_kinds(postgres_url, run_id) == []
        chained = rows(
            postgres_url,
            "SELECT kind, task_id, effect_id FROM audit_events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        assert [(k, t) for k, t, _ in chained][-2:] == [
            ("effect.requested", claim.task_id),
            ("effect.succeeded", claim.task_id),
        ]
        with store.read() as conn:
            assert verify_chain(conn, run_id).ok
    finally:
        store.close()


def test_an_edited_lane_is_refused_by_the_adoption_and_by_audit_verify(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """A lane event's payload edited in the database: ``audit --verify`` reports the lane
    (exit 5, naming the task and lane event) while it is pending, and the owner's adoption
    refuses it with ``store.corrupt`` naming run, task and lane event, moving nothing."""
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    try:
        (claim,) = _claims(store, run_id, tasks)
        fence = ClaimFence(store, claim)
        asyncio.run(_gate(fence, run_id).perform(Attempt(run_id, claim.task_id, 1), _spec(0), _ran))
        fine = cli("--output", "json", "audit", run_id, "--verify", "--db", postgres_url)
        assert fine.exit_code == 0, fine.stdout + fine.stderr
        chain = fine.json()["data"]["chain"]
        assert chain["pendingEvents"] == 2 and chain["pendingLanes"] == 1
        execute(
            postgres_url,
            "UPDATE audit_lane_events SET payload_json = ? WHERE run_id = ? AND lane_seq = 2",
            ('{"operation":"builtin.shell.exec","error":null,"edited":true}', run_id),
        )
        broken = cli("audit", run_id, "--verify", "--db", postgres_url)
        assert broken.exit_code == 5
        assert f"task {claim.task_id}" in broken.stderr + broken.stdout
        assert "lane event 2" in broken.stderr + broken.stdout
        with store.autocommit() as conn:
            claim_fences.finish_claim(conn, run_id, claim.task_id, claim.token, "{}", NOW)
        events_before = rows(
            postgres_url, "SELECT COUNT(*) FROM audit_events WHERE run_id = ?", (run_id,)
        )
        with pytest.raises(PersistenceError) as refused:
            _adopt(store, run_id, tasks)
        assert refused.value.code == "store.corrupt"
        message = str(refused.value)
        assert run_id in message and claim.task_id in message and "lane event 2" in message
        assert (
            rows(postgres_url, "SELECT COUNT(*) FROM audit_events WHERE run_id = ?", (run_id,))
            == events_before
        )
        assert len(_lane_kinds(postgres_url, run_id)) == 2  # nothing moved, nothing lost
    finally:
        store.close()


def assert_every_lane_adopted(cli: Any, database: str, run_id: str) -> list[dict[str, Any]]:
    """No lane left; the chain verifies; every effect's events are in it once each (one
    ``effect.requested``), before its task's last transition event. The chain's events."""
    assert rows(database, "SELECT COUNT(*) FROM audit_lane_events WHERE run_id = ?", (run_id,)) == [
        (0,)
    ]
    shown = cli("--output", "json", "audit", run_id, "--verify", "--db", database)
    assert shown.exit_code == 0, shown.stdout + shown.stderr
    events: list[dict[str, Any]] = shown.json()["data"]["events"]
    transitions = ("task.succeeded", "task.failed", "task.skipped", "task.cancelled")
    for effect_id, task_id in rows(
        database, "SELECT id, task_id FROM effects WHERE run_id = ?", (run_id,)
    ):
        mine = [e for e in events if e["effectId"] == effect_id]
        kinds = [e["kind"] for e in mine]
        assert kinds.count("effect.requested") == 1 and len(kinds) == len(set(kinds)), kinds
        ended = [e["seq"] for e in events if e["taskId"] == task_id and e["kind"] in transitions]
        if ended:
            assert all(e["seq"] < ended[-1] for e in mine), (task_id, kinds)
    return events


def test_a_fan_out_over_workers_leaves_every_lane_in_the_chain(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Twelve process steps over two workers: each step's effect events were written to
    lanes by whichever worker held the claim, and all are in the run's chain, once, before
    their tasks' transitions; no lane row remains."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(fan_out(tmp_path / "ledger.txt", 12, concurrency=12))
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
    events = assert_every_lane_adopted(cli, postgres_url, run_id)
    assert sum(e["kind"] == "effect.succeeded" for e in events) == 12


@pytest.mark.parametrize(
    ("fault", "exit_code", "succeeded"),
    [("effect.finished:2", 0, 12), ("effect.dispatched:2", 3, 11)],
)
def test_lanes_of_a_killed_owner_and_worker_are_adopted_by_the_next_owner(
    cli: Any, postgres_url: str, tmp_path: Path, fault: str, exit_code: int, succeeded: int
) -> None:
    """The run's owner, also the worker of its tasks, is SIGKILLed on its second task after
    that task's lane got its events (``effect.finished``: the outcome's; ``dispatched``: the
    request's only) and before any adoption: its first task's lane (claim done) and the
    second's (claim lapsed, taken again under a new token) are adopted by the next owner,
    with the new claim's lane; the chain holds each effect's events once, before its
    task's transition, and no lane is left."""
    run_id, _, _, waited = _crash_and_recover(cli, postgres_url, tmp_path, fault)
    assert waited.exit_code == exit_code, waited.stdout + waited.stderr
    events = assert_every_lane_adopted(cli, postgres_url, run_id)
    assert sum(e["kind"] == "effect.requested" for e in events) == 12
    assert sum(e["kind"] == "effect.succeeded" for e in events) == succeeded
    reclaimed = [e["taskId"] for e in events if e["kind"] == "task.reclaimed"]
    assert len(reclaimed) == 1
    first = [e for e in events if e["taskId"] == reclaimed[0] and e["effectId"]]
    # The dead worker's lane (its request) came before the new claim's (reuse or uncertain).
    assert first[0]["kind"] == "effect.requested"


def test_lane_payloads_are_sealed_and_adopted_sealed_under_the_chains_own_key(
    cli: Any, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encryption on: a lane event's payload is stored sealed (under the lane event's own
    record key), and its adoption reseals it under the chain event's: the chain verifies
    and reads back the clear payload."""
    import base64
    import os

    monkeypatch.setenv("K1", base64.b64encode(os.urandom(32)).decode())
    assert cli("db", "migrate", "--db", postgres_url).exit_code == 0
    enabled = cli(
        "db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--db", postgres_url
    )
    assert enabled.exit_code == 0, enabled.stderr
    store, run_id, tasks = _running_run(postgres_url, tmp_path, 1)
    try:
        (claim,) = _claims(store, run_id, tasks)
        fence = ClaimFence(store, claim)
        asyncio.run(_gate(fence, run_id).perform(Attempt(run_id, claim.task_id, 1), _spec(0), _ran))
        stored = rows(postgres_url, "SELECT payload_json FROM audit_lane_events")
        assert len(stored) == 2 and all(str(p).startswith("aes256gcm:k1:") for (p,) in stored)
        with store.autocommit() as conn:
            claim_fences.finish_claim(conn, run_id, claim.task_id, claim.token, "{}", NOW)
        assert _adopt(store, run_id, tasks) == 2
        chained = rows(
            postgres_url,
            "SELECT payload_json FROM audit_events WHERE run_id = ? AND kind LIKE 'effect.%'",
            (run_id,),
        )
        assert len(chained) == 2 and all(str(p).startswith("aes256gcm:k1:") for (p,) in chained)
        with store.read() as conn:
            assert verify_chain(conn, run_id).ok
            events = [e for e in list_events(conn, run_id) if e.kind == "effect.requested"]
        assert events[0].payload["operation"] == "builtin.shell.exec"
    finally:
        store.close()
