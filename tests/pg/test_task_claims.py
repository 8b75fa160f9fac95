"""Task-level claims: one run's parallel batches spread over `agentctl worker` processes on
a real PostgreSQL server, with the recovery rules of a single process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import start_agentctl
from tests.pg.backends import rows
from tests.pg.test_workers import _ready, _stop, _worker


def fan_out(ledger: Path, items: int, concurrency: int = 64) -> str:
    """``items`` process steps; each appends its effect id (its idempotency key) to
    ``ledger``, outside the workspace: one line per execution in the world."""
    return f"""
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: fan-out}}
spec:
  runtime: {{maxConcurrency: {concurrency}}}
  policy: {{approval: never, processAllowlist: [sh]}}
  actions:
    append:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo $AGENTCTL_IDEMPOTENCY_KEY >> {ledger}"]
  tasks:
    - id: unit
      uses: action:append
      foreach: {{items: {list(range(items))}, maxItems: {items}}}
"""


def _detach(cli: Any, database: str, ws: Path) -> str:
    queued = cli(
        "--output", "json", "roll", ws / "wf.yaml", "--detach", "--workspace", ws,
        "--db", database,
    )  # fmt: skip
    assert queued.exit_code == 0, queued.stdout + queued.stderr
    return str(queued.json()["data"]["runId"])


@dataclass
class FannedOut:
    """A fan-out executed by two workers: the run, its ledger, how `runs wait` answered,
    and the workers' events (filled once they stopped)."""

    run_id: str
    ledger: Path
    waited: Any
    reports: list[list[dict[str, Any]]] = field(default_factory=list)


@contextmanager
def fan_out_on_two_workers(
    cli: Any, database: str, tmp_path: Path, items: int, concurrency: int = 64
) -> Iterator[FannedOut]:
    """A fan-out of ``items`` process steps (:func:`fan_out`) detached to two workers of
    two slots each, ``w1`` and ``w2``; the block runs once `runs wait` answered, while the
    workers still run, and their events are in ``reports`` after it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    ledger = tmp_path / "ledger.txt"
    (ws / "wf.yaml").write_text(fan_out(ledger, items, concurrency))
    workers = [_spawn(database, ws, name, 2) for name in ("w1", "w2")]
    done: FannedOut | None = None
    try:
        for worker in workers:
            _ready(worker)
        run_id = _detach(cli, database, ws)
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", database)
        done = FannedOut(run_id, ledger, waited)
        yield done
    finally:
        reports = [_stop(worker) for worker in workers]
        if done is not None:
            done.reports.extend(reports)


def _ledger(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _claimed_by(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["data"]["taskId"] for e in events if e["data"].get("state") == "task.claimed")


@pytest.mark.slow
def test_a_200_task_fan_out_over_three_workers_runs_every_task_once(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ledger = tmp_path / "ledger.txt"
    (ws / "wf.yaml").write_text(fan_out(ledger, 200))
    workers = [_worker(postgres_url, ws, name) for name in ("w1", "w2", "w3")]
    try:
        for worker in workers:
            _ready(worker)
        run_id = _detach(cli, postgres_url, ws)
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        if waited.exit_code != 0:
            shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url)
            raise AssertionError(waited.stdout + shown.stdout + shown.stderr)
    finally:
        reports = [_stop(worker) for worker in workers]
    lines = _ledger(ledger)
    assert len(lines) == 200 and len(set(lines)) == 200  # every task ran once, no more
    claims = [_claimed_by(report) for report in reports]
    total = sum(claims, Counter())
    assert len(total) == 200 and set(total.values()) == {1}  # each task claimed once
    assert sum(1 for c in claims if c) >= 2  # the batch spread over workers
    shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url).json()["data"]
    assert sorted({e["status"] for e in shown["effects"]}) == ["succeeded"]
    assert len(shown["effects"]) == 200
    assert rows(postgres_url, "SELECT COUNT(*) FROM task_claims") == [(0,)]
    assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0


def _spawn(database: str, ws: Path, name: str, concurrency: int, *flags: str, **env: str) -> Any:
    return start_agentctl(
        ["--output", "jsonl", "worker", "--name", name]
        + ["--concurrency", str(concurrency), "--db", database, *flags],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**{k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}, **env},
    )


def _crash_and_recover(
    cli: Any, database: str, tmp_path: Path, fault: str, ran: int = 2
) -> tuple[str, Path, list[list[dict[str, Any]]], Any]:
    """A worker that executes one task at a time takes a 12-task run alone and SIGKILLs
    itself at ``fault`` once it claimed ``ran`` tasks (and their processes ran); then two
    workers continue. Returns the run, the ledger, the survivors' events and how `runs
    wait` ended."""
    ws = tmp_path / "ws"
    ws.mkdir()
    ledger = tmp_path / "ledger.txt"
    (ws / "wf.yaml").write_text(fan_out(ledger, 12, concurrency=12))
    run_id = _detach(cli, database, ws)
    lease = {"AGENTCTL_LEASE_SECONDS": "1"}
    doomed = _spawn(database, ws, "doomed", 1, AGENTCTL_FAULT=fault, **lease)
    try:
        out, err = doomed.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        doomed.kill()
        out, err = doomed.communicate()
        raise AssertionError(out[-3000:] + err[-3000:]) from None
    assert doomed.returncode == -signal.SIGKILL, out + err
    claimed = [json.loads(line)["data"] for line in out.splitlines() if line.strip()]
    assert sum(1 for e in claimed if e.get("state") == "task.claimed") == ran
    assert len(_ledger(ledger)) == ran  # the tasks' processes ran before the kill
    # The dead worker drove the run: only a worker told to recover interrupted runs takes
    # it (the other one executes the tasks the new driver publishes).
    # The survivors hold longer leases: with one second each, a survivor starved of CPU
    # for a second (load above ten) lost its own claim, and a third task parked uncertain —
    # correct, but not the one case this test pins. Leases are stored with each claim, so
    # the dead worker's expire after its own second.
    steady = {"AGENTCTL_LEASE_SECONDS": "15"}
    survivors = [
        _spawn(database, ws, "w1", 4, "--recover-interrupted", **steady),
        _spawn(database, ws, "w2", 4, **steady),
    ]
    try:
        for survivor in survivors:
            _ready(survivor)
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", database)
    finally:
        reports = [_stop(survivor) for survivor in survivors]
    return run_id, ledger, reports, waited


def _audit(cli: Any, database: str, run_id: str, kind: str) -> list[dict[str, Any]]:
    events = cli("--output", "json", "audit", run_id, "--db", database).json()["data"]["events"]
    return [e for e in events if e["kind"] == kind]


def test_a_worker_killed_between_effects_has_its_task_reclaimed_and_nothing_redone(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Killed after its second task's effect was confirmed, before the outcome reached the
    claim: after the lease another worker claims the task again and reuses the confirmed
    effect; the run (taken over from the dead owner) completes with every task run once."""
    run_id, ledger, reports, waited = _crash_and_recover(
        cli, postgres_url, tmp_path, "effect.finished:2"
    )
    assert waited.exit_code == 0, waited.stdout + waited.stderr
    lines = _ledger(ledger)
    assert len(lines) == 12 and len(set(lines)) == 12  # no confirmed effect ran twice
    reclaimed = _audit(cli, postgres_url, run_id, "task.reclaimed")
    assert [e["payload"]["previousWorker"] for e in reclaimed] == ["doomed"]
    assert _audit(cli, postgres_url, run_id, "run.taken_over")
    claims = sum((_claimed_by(r) for r in reports), Counter())
    assert claims[reclaimed[0]["taskId"]] == 1 and len(claims) == 11  # the done one was kept
    assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0


def test_an_owner_killed_with_its_batch_done_leaves_the_outcomes_to_the_next_owner(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Killed with every claim of its batch done, before the batch's commit: the claims are
    removed by that commit only, so the worker that takes the run over finds them done with
    the same basis and commits their outcomes; no task is claimed or executed again, and
    the tasks' audit lanes join the chain once. (The claims used to be removed in a commit
    of their own before the batch's: a kill between the two left the outcomes nowhere, and
    every task of the batch was claimed and executed again.)"""
    run_id, ledger, reports, waited = _crash_and_recover(
        cli, postgres_url, tmp_path, "batch.committing", ran=12
    )
    assert waited.exit_code == 0, waited.stdout + waited.stderr
    lines = _ledger(ledger)
    assert len(lines) == 12 and len(set(lines)) == 12
    assert _audit(cli, postgres_url, run_id, "run.taken_over")
    assert sum((_claimed_by(r) for r in reports), Counter()) == Counter()
    items = [e for e in _audit(cli, postgres_url, run_id, "task.succeeded") if "--" in e["taskId"]]
    assert len(items) == 12 and len({e["taskId"] for e in items}) == 12
    events = cli("--output", "json", "audit", run_id, "--db", postgres_url).json()["data"]
    by_effect = Counter((e["kind"], e["effectId"]) for e in events["events"] if e["effectId"])
    assert by_effect and max(by_effect.values()) == 1, by_effect  # each lane adopted once
    assert len({effect for _, effect in by_effect}) == 12
    assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0


def test_only_the_worker_driving_the_run_listens_for_its_tasks_outcomes(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """The worker that drives the run listens on the done channel, where each claimed
    task's outcome wakes the owner; the other never does, so it is not woken by every task
    of the run (it used to hear every outcome of every run on the one channel all workers
    share)."""
    with fan_out_on_two_workers(cli, postgres_url, tmp_path, 16, concurrency=16) as done:
        listening = rows(
            postgres_url,
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN %'",
        )
    assert done.waited.exit_code == 0, done.waited.stdout + done.waited.stderr
    assert len(set(_ledger(done.ledger))) == 16
    drove = [any(e["data"].get("state") == "claimed" for e in r) for r in done.reports]
    assert sorted(drove) == [False, True]
    queries = [q for (q,) in listening]
    # (`runs wait`'s own listener may still be closing: two or three on the runs channel.)
    assert queries.count("LISTEN agentctl_done") == 1, queries
    assert queries.count("LISTEN agentctl_runs") >= 2, queries


def test_a_worker_killed_mid_effect_leaves_it_uncertain_and_nobody_guesses(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Killed after its second task's process ran, before the outcome was recorded: the
    worker that claims the task after the lease finds the effect started and unconfirmed,
    records it uncertain and does not run it again; the run parks for a person. After the
    operator's reconciliation the run completes with every task run exactly once."""
    run_id, ledger, _, waited = _crash_and_recover(
        cli, postgres_url, tmp_path, "effect.dispatched:2"
    )
    assert waited.exit_code == 3, waited.stdout + waited.stderr
    shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url).json()["data"]
    uncertain = [e for e in shown["effects"] if e["status"] == "uncertain"]
    succeeded = [e for e in shown["effects"] if e["status"] == "succeeded"]
    assert len(uncertain) == 1 and len(succeeded) == 11
    lines = _ledger(ledger)
    assert len(lines) == 12 and len(set(lines)) == 12  # the uncertain one was not rerun
    assert uncertain[0]["effectId"] in lines  # it did run: the operator can tell
    assert _audit(cli, postgres_url, run_id, "task.reclaimed")
    # The operator checks the world (the ledger line is there) and concludes it applied,
    # with the result the process gave (the same as its siblings').
    result = tmp_path / "result.json"
    result.write_text(json.dumps(succeeded[0]["result"]))
    concluded = cli(
        "reconcile", uncertain[0]["effectId"], "--status", "applied", "--result-file", result,
        "--reason", "the ledger line is there", "--approved", "--db", postgres_url,
    )  # fmt: skip
    assert concluded.exit_code == 0, concluded.stdout + concluded.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", postgres_url)
    assert resumed.exit_code == 0, resumed.stdout + resumed.stderr
    assert sorted(_ledger(ledger)) == sorted(lines)  # nothing ran again
    assert cli("audit", run_id, "--verify", "--db", postgres_url).exit_code == 0


def test_a_late_write_of_a_reclaimed_task_is_refused_by_its_fencing_token(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Worker A's claim lapses and B claims the task: A's writes (an effect journal write
    through its fence, its outcome) are refused and change nothing; B's land."""
    from datetime import UTC, datetime, timedelta

    from agentctl.engine.run.claimed_tasks import ClaimFence
    from agentctl.errors import OwnershipLostError
    from agentctl.store import claim_fences
    from agentctl.store import task_claims_repo as repo
    from agentctl.store.engine import open_store

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(fan_out(tmp_path / "ledger.txt", 2, concurrency=2))
    run_id = _detach(cli, postgres_url, ws)
    now = datetime(2030, 1, 1, tzinfo=UTC)
    with open_store(postgres_url) as store:
        with store.write() as conn:
            repo.publish(conn, run_id, [repo.Published("unit[0]", "b1", "{}")], now)
            (first,) = repo.claim_ready(conn, "A", now, 5, lease_seconds=1)
        with store.write() as conn:
            (second,) = repo.claim_ready(conn, "B", now + timedelta(seconds=2), 5, lease_seconds=60)
        assert (second.token, second.previous_worker) == (first.token + 1, "A")
        stale = ClaimFence(store, first)
        try:
            with stale.write() as conn:
                conn.exec_driver_sql("UPDATE runs SET cancel_reason = 'A was here'")
            raise AssertionError("a stale claim wrote")
        except OwnershipLostError as lost:
            assert "fencing token" in lost.message
        try:
            with store.write() as conn:
                claim_fences.finish_claim(conn, run_id, "unit[0]", first.token, '{"by": "A"}', now)
            raise AssertionError("a stale outcome was recorded")
        except OwnershipLostError:
            pass
        with ClaimFence(store, second).write() as conn:
            conn.exec_driver_sql("UPDATE runs SET cancel_reason = 'B was here'")
        # The outcome as a worker records it: one statement fenced by the token (a fenced
        # write checks its claim before its commit, after the outcome ended the claim).
        with store.autocommit() as conn:
            claim_fences.finish_claim(conn, run_id, "unit[0]", second.token, '{"by": "B"}', now)
    assert rows(postgres_url, "SELECT cancel_reason FROM runs") == [("B was here",)]
    assert rows(postgres_url, "SELECT state, outcome_json, worker FROM task_claims") == [
        ("done", '{"by": "B"}', "B")
    ]


def test_a_cancel_withdraws_the_claims_and_stops_the_tasks_on_every_worker(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """The run-level rule holds across workers: a cancel request stops the batch's tasks
    wherever they run, the run ends cancelled, and no claim is left behind."""
    import queue

    from tests.pg.test_worker_adoption import Watched, _until

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: long}\nspec:\n"
        "  runtime: {maxConcurrency: 4}\n"
        "  policy: {approval: never, processAllowlist: [sleep]}\n"
        "  actions:\n    wait: {kind: builtin.shell.exec, command: sleep, args: ['600']}\n"
        "  tasks:\n    - id: unit\n      uses: action:wait\n"
        "      foreach: {items: [1, 2, 3, 4], maxItems: 4}\n"
    )
    processes = [_spawn(postgres_url, ws, name, 2) for name in ("w1", "w2")]
    for process in processes:
        _ready(process)
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    workers = [Watched(process, events) for process in processes]
    try:
        run_id = _detach(cli, postgres_url, ws)
        for _ in range(4):
            _until(events, run_id, {"task.claimed"})
        cancelled = cli("cancel", run_id, "--reason", "enough", "--db", postgres_url)
        assert cancelled.exit_code == 0, cancelled.stdout + cancelled.stderr
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 130, waited.stdout + waited.stderr
        ended = [_until(events, run_id, {"task.stopped", "task.lost"}) for _ in range(4)]
    finally:
        reports = [worker.stop() for worker in workers]
    assert {e["taskId"] for e in ended} == {
        e["data"]["taskId"] for r in reports for e in r if e["data"].get("state") == "task.claimed"
    }
    assert rows(postgres_url, "SELECT COUNT(*) FROM task_claims") == [(0,)]
    shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url).json()["data"]
    assert shown["run"]["state"] == "cancelled"
    assert not [e for e in shown["effects"] if e["status"] == "succeeded"]


def test_approvals_asked_by_tasks_on_other_workers_park_the_run_and_a_worker_resumes_it(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """Tasks of one batch ask for approval on whichever worker claimed them; the driver
    parks the run with every request; once all are decided a worker adopts the run and the
    approved effects run exactly once."""
    import queue

    from tests.pg.test_worker_adoption import Watched, _until

    ws = tmp_path / "ws"
    ws.mkdir()
    ledger = tmp_path / "ledger.txt"
    (ws / "wf.yaml").write_text(
        fan_out(ledger, 3, concurrency=3).replace("approval: never", "approval: always")
    )
    processes = [_spawn(postgres_url, ws, name, 2) for name in ("w1", "w2")]
    for process in processes:
        _ready(process)
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    workers = [Watched(process, events) for process in processes]
    try:
        run_id = _detach(cli, postgres_url, ws)
        _until(events, run_id, {"paused"})
        listed = cli("--output", "json", "approvals", "list", run_id, "--db", postgres_url)
        pending = [a["approvalId"] for a in listed.json()["data"]["approvals"]]
        assert len(pending) == 3 and _ledger(ledger) == []  # nothing ran before approval
        for approval in pending:
            approved = cli("approvals", "approve", approval, "--reason", "ok", "--db", postgres_url)
            assert approved.exit_code == 0, approved.stdout + approved.stderr
        _until(events, run_id, {"adopted"})
        _until(events, run_id, {"succeeded", "failed", "paused", "error"})
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 0, waited.stdout + waited.stderr
    finally:
        for worker in workers:
            worker.stop()
    lines = _ledger(ledger)
    assert len(lines) == 3 and len(set(lines)) == 3
    assert rows(postgres_url, "SELECT COUNT(*) FROM task_claims") == [(0,)]


def test_the_run_deadline_stops_tasks_running_on_other_workers(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """`maxWallTimeSeconds` counts from the run's creation on every worker: when it passes,
    the driver fails the run and the tasks other workers execute are stopped."""
    import queue

    from tests.pg.test_worker_adoption import Watched, _until

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: late}\nspec:\n"
        "  runtime: {maxConcurrency: 4, budgets: {maxWallTimeSeconds: 2}}\n"
        "  policy: {approval: never, processAllowlist: [sleep]}\n"
        "  actions:\n    wait: {kind: builtin.shell.exec, command: sleep, args: ['600']}\n"
        "  tasks:\n    - id: unit\n      uses: action:wait\n"
        "      foreach: {items: [1, 2, 3, 4], maxItems: 4}\n"
    )
    processes = [_spawn(postgres_url, ws, name, 2) for name in ("w1", "w2")]
    for process in processes:
        _ready(process)
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    workers = [Watched(process, events) for process in processes]
    try:
        run_id = _detach(cli, postgres_url, ws)
        _until(events, run_id, {"task.claimed"})
        waited = cli("--output", "json", "runs", "wait", run_id, "--db", postgres_url)
        assert waited.exit_code == 4, waited.stdout + waited.stderr
    finally:
        # Draining, each worker finishes the tasks in hand: they stop once they see the
        # run ended, so every claimed task has said how it ended by then.
        lines = [e["data"] for worker in workers for e in worker.stop()]
    claimed = {e["taskId"] for e in lines if e.get("state") == "task.claimed"}
    stopped = {e["taskId"] for e in lines if e.get("state") in ("task.stopped", "task.lost")}
    assert claimed and stopped == claimed
    assert not [e for e in lines if e.get("state") == "task.done"]
    shown = cli("--output", "json", "inspect", run_id, "--db", postgres_url).json()["data"]
    assert shown["run"]["error"]["code"] == "budget.wall_time_exceeded"
    assert rows(postgres_url, "SELECT COUNT(*) FROM task_claims") == [(0,)]
