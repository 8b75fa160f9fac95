"""Task-level claims, the worker's side: executing one task of another process's run.

A worker claims a task row (:mod:`agentctl.store.task_claims_repo`) and executes the task
through the run's one task-attempt path (:class:`~agentctl.engine.run.attempts.TaskAttempts`:
retries, timeouts, the effect gate, artifact ingestion), as the executor does, over a
snapshot of the run as its owner last committed it: plan, task rows, working memory. What
differs from the owner's execution is only who may write:

- every write goes through :class:`ClaimFence`, which checks the claim's fencing token
  inside the write transaction (the claim's row read ``FOR SHARE``; the run's lock is
  taken late, only for the budget ledger, see ``locks.hold_run``; the task's audit events
  go to the claim's lane, which the owner adopts into the chain):
  after the lease ran out and another worker claimed the task, or after the owner
  withdrew the claim (cancel, deadline, takeover), this worker's writes fail and nothing
  of it lands;
- the outcome is written on the claim row, fenced the same way, in one transaction; the
  task row, checkpoint and audit transition are the owner's commit, in plan order;
- the worker's heartbeat (:mod:`agentctl.engine.run.claim_heartbeat`, one for all of its
  claims) renews the claim's lease and watches the run: a cancel request, a passed
  deadline or a run no longer ``running`` cancels the task, whose in-flight effects record
  what is known of them (or, when the fence already refuses, stay ``started`` and become
  ``uncertain`` for whoever executes the task next: nobody guesses).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentctl.engine.core.records import (
    RunLog,
    RunRow,
    advance_memory,
    load_run,
    replay_memory,
)
from agentctl.engine.effects import tracing
from agentctl.engine.run.artifacts import RunArtifacts
from agentctl.engine.run.attempts import TaskAttempts
from agentctl.engine.run.claim_heartbeat import ClaimHeartbeat
from agentctl.engine.run.frontier import StoredPlan, TaskOutputs, TaskRows
from agentctl.engine.run.outcome import ExecutionOptions, TaskOutcome
from agentctl.engine.run.task_claims import outcome_to_json
from agentctl.errors import Cancelled, OwnershipLostError
from agentctl.ids import Clock
from agentctl.observability.audit_lanes import ClaimLane
from agentctl.policy.secrets import secret_sources
from agentctl.store import claim_fences, ownership, task_claims_repo
from agentctl.store.engine import SqlRunner, Store
from agentctl.store.task_claims_repo import ClaimedTask

if TYPE_CHECKING:
    from agentctl.compiler.plan import PlanTask

__all__ = ["ClaimFence", "RunSnapshots", "execute_claimed"]


class ClaimFence(ownership.OwnedRun):
    """The store as the holder of one task claim sees it: every write is fenced by the
    claim's token (the run owner's token is not this worker's to use)."""

    def __init__(self, store: Store, claimed: ClaimedTask) -> None:
        super().__init__(store, ownership.Claim(claimed.run_id, "task-claim", claimed.token, None))
        self.task_id = claimed.task_id
        #: The claim's audit lane: the task's events, which the run's owner adopts into
        #: the chain (observability/audit_lanes.py); its head moves with each commit here.
        self.lane = ClaimLane(claimed.run_id, claimed.task_id, claimed.token)

    def check(self, conn: Any) -> None:
        # The claim's row read FOR SHARE, as in row_write: a reclaim passes it by and a
        # withdrawal waits, so nothing of a write lands once the claim is lost.
        claim_fences.check_claim(conn, self.run_id, self.task_id, self.token, lock_row=True)

    def commit(self, conn: Any) -> None:
        # The same fence with the COMMIT, in one round trip (the commit refused by it).
        claim_fences.commit_if_claim_holds(conn, self.run_id, self.task_id, self.token)

    def lock_and_check(self, conn: Any) -> None:
        claim_fences.lock_run_and_check_claim(conn, self.run_id, self.task_id, self.token)

    @contextmanager
    def write(self) -> Iterator[Any]:
        # At the driver level, as the owner's batch commits: a claimed task's effect makes
        # three of these transactions, and SQLAlchemy's per-statement work would cost
        # more CPU than the statements. Each commits whole or rolls back, and the lane's
        # head with it (the lane's transaction is left after the COMMIT).
        with self.lane.transaction(), self.driver_session() as session, session.write() as conn:
            yield conn

    def driver_session(self) -> Any:
        # The store lock from BEGIN, the run's lock late (locks.hold_run): the gate's
        # writes of this task's own effect rows and of its claim's audit lane do not wait
        # for the run's other writers; the budget ledger (a read-then-write of the run)
        # does, from its first statement to the commit, the claim's fence checked right
        # after the lock, or before the commit when the write needed no lock.
        return self.store.driver_session(late_fence=self)

    @contextmanager
    def row_write(self) -> Iterator[Any]:
        # The move to ``started`` (a guarded update of the effect's row) without the run's
        # lock or a transaction around it: one statement whose WHERE holds the claim's
        # fence (its row read ``FOR SHARE``, so a reclaim passes it by and a withdrawal
        # waits until it commits), and nothing but such fenced transitions runs through
        # it. Once the claim is lost nothing lands.
        with self.store.autocommit() as conn:
            yield claim_fences.FencedRows(conn, self.run_id, self.task_id, self.token)


@dataclass
class _Snapshot:
    run: RunRow
    plan: StoredPlan
    rows: TaskRows
    memory: dict[str, Any]
    checkpoint_seq: int


def _needed(task: PlanTask) -> list[str]:
    """The task rows executing ``task`` reads: its own and those of the tasks it depends
    on, is routed by or collects (the compiler allows templates to read only ``needs``)."""
    return [
        task.id,
        *task.needs,
        *(guard.router for guard in task.route_guards),
        *task.uses.children,
    ]


class RunSnapshots:
    """The committed state of the runs whose tasks this worker executes.

    A snapshot is keyed by the run's owner token and last checkpoint
    (:func:`task_claims_repo.snapshot_key`): nothing the owner commits can change a task row
    or the working memory without adding a checkpoint. A claim carries the key the run had
    when it was taken, so a task whose run's snapshot is at that key is executed with no
    read at all. Otherwise one read transaction brings the snapshot to the current key,
    reading only what the tasks of the owner's current batch need: their plan records
    (kept for the run: a plan never changes), the rows of the tasks they read, and the
    checkpoints added since the memory was last read (all of them, from the last full
    snapshot, for a new owner). The whole plan and every row are never read: their cost
    grows with the run, where a batch's does not.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[str, tuple[tuple[int, int], _Snapshot]] = {}
        self._lock = threading.Lock()

    def cached(self, claimed: ClaimedTask) -> _Snapshot | None:
        """The snapshot for ``claimed`` when this worker holds it already (no read)."""
        found = self._cache.get(claimed.run_id)
        # The same owner, and at least the state the claim was taken in (what a task of
        # the batch reads does not change until the owner commits the batch).
        if (
            found is None
            or found[0][0] != claimed.snapshot_key[0]
            or found[0][1] < claimed.snapshot_key[1]
        ):
            return None
        snapshot = found[1]
        if not snapshot.plan.holds(claimed.task_id):
            return None
        task = snapshot.plan.tasks[claimed.task_id]
        if not snapshot.rows.holds(_needed(task)):
            return None
        return snapshot

    def get(self, claimed: ClaimedTask) -> _Snapshot:
        """The snapshot for ``claimed``, read or brought up to date (one read transaction)."""
        with self._lock:
            # The tasks of one claim start together: the first one's read serves the rest.
            ready = self.cached(claimed)
            if ready is not None:
                return ready
            return self._read(claimed)

    def _read(self, claimed: ClaimedTask) -> _Snapshot:
        run_id = claimed.run_id
        with self.store.read() as conn:
            key = task_claims_repo.snapshot_key(conn, run_id)
            found = self._cache.get(run_id)
            if found is None or found[0][0] != key[0] or found[0][1] > key[1]:
                # First task of the run here, or a new owner: read the run from scratch.
                run = load_run(conn, run_id)
                spec = run.workflow.get("spec") or {}
                initial = (spec.get("memory") or {}).get("working") or {}
                snapshot = _Snapshot(
                    run,
                    StoredPlan(run_id, run.plan, self._reader),
                    TaskRows(run_id, {}, self._reader),
                    replay_memory(conn, run_id, initial),
                    key[1],
                )
            elif found[0] != key:
                # The owner committed since: the same run and plan, rows read afresh, the
                # memory advanced by the checkpoints added since.
                old = found[1]
                snapshot = _Snapshot(
                    old.run,
                    old.plan,
                    TaskRows(run_id, {}, self._reader),
                    advance_memory(conn, run_id, old.memory, old.checkpoint_seq),
                    key[1],
                )
            else:
                snapshot = found[1]
            # What the other tasks of the owner's batch need too: this worker is likely to
            # claim some of them, and then needs no read for them.
            batch = [claimed.task_id, *task_claims_repo.published_task_ids(conn, run_id)]
            plan = snapshot.plan
            plan.load([*batch, *plan.artifact_tasks], conn)
            needed: dict[str, None] = {}
            for task_id in batch:
                if plan.holds(task_id):
                    needed.update(dict.fromkeys(_needed(plan.tasks[task_id])))
            snapshot.rows.load(list(needed), conn)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[run_id] = (key, snapshot)
        return snapshot

    def _reader(self) -> SqlRunner:
        # A record the snapshot was not given is read on its own (a plan record never
        # changes; a finished task's row does not either).
        return self.store.reads_one_by_one()


def _attempts(
    store: Store,
    claimed: ClaimedTask,
    snapshot: _Snapshot,
    *,
    clock: Clock,
    options: ExecutionOptions,
) -> TaskAttempts:
    """The run's one task-attempt path (engine/run/attempts.py) over the snapshot, writing
    through the claim's fence. The task row is the owner's to write (in its ordered batch
    commit), so nothing here marks it running; a worker has no terminal to ask at."""
    fence = ClaimFence(store, claimed)
    run = snapshot.run
    return TaskAttempts(
        run=run,
        plan=snapshot.plan,
        rows=snapshot.rows,
        outputs=TaskOutputs(snapshot.rows),
        writer=fence,
        log=RunLog(run.id, checkpoint_seq=snapshot.checkpoint_seq, lane=fence.lane),
        trace=tracing.RunTrace.off(run.id),
        clock=clock,
        options=options,
        artifacts=RunArtifacts(store, clock, run.id),
        session=lambda: fence,
    )


async def _run_claimed(attempts: TaskAttempts, claimed: ClaimedTask, memory: Any) -> TaskOutcome:
    payload = json.loads(claimed.payload_json)
    task = attempts.plan.tasks[claimed.task_id]
    with secret_sources(attempts.workspace.workspace_root, attempts.policy):
        try:
            return await attempts.run_task(
                task, dict(payload.get("vars") or {}), memory, payload.get("condition")
            )
        finally:
            attempts.artifacts.close()


async def execute_claimed(
    store: Store,
    claimed: ClaimedTask,
    snapshots: RunSnapshots,
    *,
    clock: Clock,
    options: ExecutionOptions,
    timings: dict[str, float] | None = None,
    heartbeat: ClaimHeartbeat | None = None,
) -> str:
    """Execute one claimed task and record its outcome on the claim; how it ended:
    ``done``, ``lost`` (the claim was taken or withdrawn: nothing more was written) or
    ``stopped`` (the run was cancelled, passed its deadline or ended).

    ``heartbeat`` is the worker's, which renews the leases of all of its claims at once
    (one of its own otherwise). ``timings`` receives ``taskMs`` (from here to the outcome
    recorded) and ``finishMs`` (recording the outcome), for the worker's events."""
    began = time.perf_counter()
    snapshot = snapshots.cached(claimed)
    if snapshot is None:
        snapshot = await asyncio.to_thread(snapshots.get, claimed)
    attempts = _attempts(store, claimed, snapshot, clock=clock, options=options)
    work = asyncio.create_task(_run_claimed(attempts, claimed, snapshot.memory))
    if heartbeat is None:
        heartbeat = ClaimHeartbeat(store, clock)
    held = heartbeat.hold(claimed, snapshot.run.deadline_at, work)
    try:
        outcome = await work
    except OwnershipLostError:
        return "lost"
    except (asyncio.CancelledError, Cancelled):
        if held.reason is not None:  # the heartbeat stopped it
            return held.reason
        raise
    finally:
        heartbeat.release(held)
    encoded = json.dumps(outcome_to_json(outcome), sort_keys=True, separators=(",", ":"))
    finishing = time.perf_counter()
    try:
        # The token in the update's condition is the fence: no need to queue for the
        # store's write lock behind every other write of every worker, nor for a
        # transaction around the one statement (which also wakes the run's owner).
        with store.autocommit() as conn:
            claim_fences.finish_claim(
                conn, claimed.run_id, claimed.task_id, claimed.token, encoded, clock.now()
            )
    except OwnershipLostError:
        return "lost"
    if timings is not None:
        finished = time.perf_counter()
        timings["taskMs"] = round((finished - began) * 1000, 1)
        timings["finishMs"] = round((finished - finishing) * 1000, 1)
    return "done"
