"""``agentctl worker``: execute runs released to workers on a PostgreSQL store.

A worker claims runs released to the workers (``roll --detach``, a run another worker
gave back), and with ``recover_interrupted`` also runs whose driving owner died (left for
an operator otherwise, as the daemon and the dashboard leave them), and executes each
exactly as ``agentctl resume`` would, up to ``concurrency`` at a time, in one asyncio loop.
Claiming is one write transaction: ``SELECT … FOR UPDATE SKIP LOCKED`` picks the rows, each
run's lock is tried (a run with a write in flight is passed by), and :func:`ownership.claim`
takes each run with a fresh fencing token under the owner id the execution then uses. From there the
ordinary executor holds the run: its heartbeat renews the lease, every write is fenced, the
effect protocol is the one of a single process. So two workers never execute one run at
once, and a worker that lost its run (stopped past its lease, cut off from the database)
fails its next write instead of overwriting the new owner's.

Idle, a worker waits on ``LISTEN agentctl_runs`` and looks for work at most about once a
second; from the first run it drives, it also listens on ``agentctl_done``, where claimed
tasks' outcomes wake their runs' owners (a worker that drives nothing never hears them).
Stopping (:meth:`Worker.stop`, SIGTERM/SIGINT in the CLI) drains: no new claims;
the runs in hand finish or park; then :meth:`Worker.serve` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentctl.engine.actions.agent import ProviderPool
from agentctl.engine.core.faults import Faults
from agentctl.engine.core.records import RunLog, load_run
from agentctl.engine.run.outcome import ExecutionOptions, RunOutcome
from agentctl.errors import (
    AgentctlError,
    BlockedError,
    OwnershipLostError,
    PersistenceError,
    UsageError,
)
from agentctl.ids import Clock
from agentctl.store import locks, ownership, run_queue, task_claims_repo
from agentctl.store.adoption import adoptable_parked_runs
from agentctl.store.engine import Store
from agentctl.store.errors import TRANSIENT_CODES, retry_window_seconds

__all__ = ["Worker", "WorkerReport", "detach_run", "require_postgres", "wait_for_run"]

T = TypeVar("T")

#: The longest an idle worker (or ``runs wait``) goes without looking at the database.
IDLE_SECONDS = 1.0

#: Run states ``runs wait`` returns on: finished, or parked until a person acts.
SETTLED_STATES = frozenset({"succeeded", "failed", "cancelled", "paused"})

Events = Callable[[str, dict[str, Any]], None]


def _warm_up() -> None:
    """Load what executing a claimed task loads on first use (the artifact store, the
    model providers' HTTP stack and TLS context) before the worker says it is ready: a
    worker's first tasks otherwise paid for it while holding their claims (350-450 ms for
    the first model calls of four workers starting together on two cores, against 80 ms)."""
    import agentctl.artifacts.store  # noqa: F401 - imported for its side effect
    from agentctl.providers.http import warm_up

    warm_up()


def require_postgres(store: Store, what: str) -> None:
    if store.dialect != "postgresql":
        raise UsageError(
            f"{what} needs a PostgreSQL database (--db postgresql://…): workers share runs "
            "through it; a SQLite file is used by one process at a time",
            code="worker.needs_postgres",
            hint=(
                "drop --detach to run the workflow in this process, or point --db at "
                "PostgreSQL (see docs/postgresql.md)"
                if "--detach" in what
                else "point --db at PostgreSQL (see docs/postgresql.md); without workers, "
                "`agentctl roll` runs a workflow in its own process"
            ),
        )


def detach_run(store: Store, run_id: str) -> None:
    """Release a just-created run to the workers (it has no owner yet)."""
    require_postgres(store, "roll --detach")
    with store.write(locks.run(run_id)) as conn:
        run_queue.release_to_workers(conn, run_id)


@dataclass
class WorkerReport:
    """What one worker did; ``runs`` maps each run it executed to its final state."""

    name: str
    runs: dict[str, str] = field(default_factory=dict)


class Worker:
    def __init__(
        self,
        store: Store,
        *,
        name: str,
        concurrency: int,
        clock: Clock,
        events: Events | None = None,
        recover_interrupted: bool = False,
    ) -> None:
        require_postgres(store, "agentctl worker")
        if concurrency < 1:
            raise UsageError(
                f"--concurrency must be at least 1 (got {concurrency})",
                code="worker.bad_concurrency",
            )
        self.store = store
        self.name = name
        self.concurrency = concurrency
        self.clock = clock
        # Runs whose driving owner died are an operator's unless the worker was told.
        self.recover_interrupted = recover_interrupted
        self.report = WorkerReport(name)
        self._events = events or (lambda _kind, _data: None)
        self._stopping: asyncio.Event | None = None
        #: What ends a round's wait: set by a notification, by a task or run in hand
        #: finishing (their done callbacks) and by the stop.
        self._round: asyncio.Event | None = None
        self._task_claims: Any = None
        #: What wakes a run this worker drives while it waits for its claimed tasks.
        self._wakeups: Any = None
        # One set of fault points for the process (test-only): ``point:n`` counts hits
        # across every run and task this worker executes.
        self._faults = Faults()
        self._snapshots: Any = None
        # The one heartbeat of every task this worker executes under a claim.
        self._heartbeat: Any = None
        # The environment and owner id every claimed task is executed with (made once).
        self._task_basis: tuple[dict[str, str], str] | None = None

    def stop(self) -> None:
        """Stop claiming; :meth:`serve` returns once the runs in hand finish or park."""
        if self._stopping is not None:
            self._stopping.set()
        if self._round is not None:
            self._round.set()

    def _wake_round(self, _: object = None) -> None:
        """End the round's wait (a task or run in hand finished)."""
        if self._round is not None:
            self._round.set()

    async def serve(self) -> WorkerReport:
        from agentctl.engine.run.batch_wakeups import BatchWakeups
        from agentctl.engine.run.claim_heartbeat import ClaimHeartbeat
        from agentctl.engine.run.claimed_tasks import RunSnapshots
        from agentctl.engine.run.task_claims import TaskClaims

        self._stopping = asyncio.Event()
        _warm_up()
        listener = await run_queue.RunsListener.open(self.store)
        self._wakeups = BatchWakeups(self.store, listener)
        self._task_claims = TaskClaims(self._wakeups.subscribe, self._wakeups.unsubscribe)
        self._snapshots = RunSnapshots(self.store)
        self._heartbeat = ClaimHeartbeat(self.store, self.clock)
        driving: dict[asyncio.Task[None], str] = {}
        executing: set[asyncio.Task[None]] = set()
        self._events("WorkerEvent", {"worker": self.name, "state": "ready"})
        draining = False
        # What to look for on this round: a notification says what changed (a task
        # outcome wakes only the run's owner); about once a second everything is looked
        # at anyway (expired leases send no notification).
        look_runs = look_tasks = True
        # The periodic round also looks for claims whose lease ran out (a reclaim takes
        # the write lock); the others claim ready tasks only, with row locks.
        periodic = True
        more_tasks = False
        last_look = asyncio.get_running_loop().time()
        # What ends a round's wait: a notification (or the listener reconnecting), a task
        # or run in hand finishing, the stop, the idle timeout. One event all of them set,
        # waited for in this task under a timer: no task a round (an event's wait made one
        # for each notification, and asyncio.wait hooked every task in hand, about two
        # rounds per claimed task).
        heard = self._round = listener.subscribe()
        try:
            while True:
                if self._stopping.is_set() and not draining:
                    draining = True
                    self._events("WorkerEvent", {"worker": self.name, "state": "draining"})
                if draining and not driving and not executing:
                    break
                free_runs = self.concurrency - len(driving)
                free = self.concurrency - len(executing)
                # Draining, this worker still executes the tasks of the runs it drives
                # (they may wait for nobody else), and claims nothing more.
                only = set(driving.values()) if draining else None
                # Woken by a published batch or a freed slot, a worker claims at once: a
                # claim of ready tasks takes no write lock, and finding none costs what a
                # look would. Otherwise one read says whether a claim under the write lock
                # (runs; expired task claims) would find anything.
                claim_now = look_tasks and free > 0 and not periodic
                look_runs, found_tasks = self._look(
                    look_runs and free_runs > 0 and not draining,
                    look_tasks and free > 0 and periodic,
                    only,
                )
                if look_runs:
                    for run_id, owner_id in self._claim_or_wait(free_runs):
                        execution = asyncio.create_task(self._execute(run_id, owner_id))
                        execution.add_done_callback(self._wake_round)
                        driving[execution] = run_id
                if claim_now or found_tasks:
                    # Never more than the free slots: the rest stay for the other workers,
                    # and this one claims again as each of its slots frees.
                    claimed_now = self._claim_tasks_or_wait(free, only, reclaim=periodic)
                    more_tasks = len(claimed_now) == free  # there may be more waiting
                    for claimed in claimed_now:
                        execution = asyncio.create_task(self._execute_task(claimed))
                        execution.add_done_callback(self._wake_round)
                        executing.add(execution)
                if not heard.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(IDLE_SECONDS):
                            await heard.wait()
                # Nothing runs between the wait and here: whatever happens later sets it
                # again (the payloads are the listener's, drained below).
                heard.clear()
                heard.heard()
                freed = any(task.done() for task in executing)
                driving = {task: run for task, run in driving.items() if not task.done()}
                executing = {task for task in executing if not task.done()}
                payloads = listener.drain()
                now = asyncio.get_running_loop().time()
                periodic = now - last_look >= IDLE_SECONDS
                if periodic:
                    last_look = now
                look_runs = periodic or any(not p.startswith(("tasks:", "done:")) for p in payloads)
                look_tasks = (
                    periodic
                    or (freed and more_tasks)
                    or any(p.startswith("tasks:") for p in payloads)
                    or (draining and freed)
                )
        finally:
            self._round = None
            listener.unsubscribe(heard)
            await self._wakeups.close()
            await listener.close()
        self._events("WorkerEvent", {"worker": self.name, "state": "stopped"})
        return self.report

    def _or_wait(self, step: Callable[[], T], fallback: T) -> T:
        """``step()``; a transient store error (a lock held too long, a server restarting)
        is reported as ``waiting`` and answered with ``fallback``, so the next round tries
        again instead of stopping the worker (and the runs it executes)."""
        try:
            return step()
        except PersistenceError as exc:
            if exc.code not in TRANSIENT_CODES:
                raise
            self._events(
                "WorkerEvent",
                {"worker": self.name, "state": "waiting", "code": exc.code, "message": exc.message},
            )
            return fallback

    def _look(self, runs: bool, tasks: bool, only_runs: set[str] | None) -> tuple[bool, bool]:
        """Whether there are runs, and tasks, to claim (one read transaction; nothing when
        neither is asked). An idle worker makes this read about once a second."""
        if not runs and not tasks:
            return False, False
        return self._or_wait(lambda: self._peek(runs, tasks, only_runs), (False, False))

    def _peek(self, runs: bool, tasks: bool, only_runs: set[str] | None) -> tuple[bool, bool]:
        now = self.clock.now()
        with self.store.read() as conn:
            found_runs = runs and (
                run_queue.any_claimable_run(conn, now, interrupted=self.recover_interrupted)
                or bool(adoptable_parked_runs(conn, now, limit=1))
            )
            found_tasks = tasks and task_claims_repo.claimable(conn, now, only_runs)
        return found_runs, found_tasks

    def _claim_tasks_or_wait(
        self, limit: int, only_runs: set[str] | None, *, reclaim: bool
    ) -> list[task_claims_repo.ClaimedTask]:
        """Claim ready tasks of any running run (task-level claims); a held lock or a
        restarting server is reported and retried on the next round."""
        return self._or_wait(lambda: self._claim_tasks(limit, only_runs, reclaim=reclaim), [])

    def _claim_tasks(
        self, limit: int, only_runs: set[str] | None, *, reclaim: bool
    ) -> list[task_claims_repo.ClaimedTask]:
        """Claim up to ``limit`` tasks. Ready tasks are claimed with row locks only, in one
        statement (``Store.autocommit``); with ``reclaim``, claims whose lease ran out are
        taken too, each under its run's lock (tried, never waited for), as each is recorded
        with an audit event of its run."""
        now = self.clock.now()
        if not reclaim:
            # Ready rows only: one statement, exact by its row locks (no transaction).
            with self.store.autocommit() as conn:
                claimed = task_claims_repo.claim_ready_rows(
                    conn, self.name, now, limit, ownership.lease_seconds(), only_runs=only_runs
                )
            self._claimed_events(claimed)
            return claimed
        with self.store.write(locks.Locks()) as conn:
            claimed = task_claims_repo.claim_ready(
                conn,
                self.name,
                now,
                limit,
                ownership.lease_seconds(),
                only_runs=only_runs,
                reclaim=reclaim,
            )
            for item in claimed:
                if item.previous_worker is not None:
                    # The previous holder's lease ran out: it died or is cut off; its late
                    # writes are refused by the token this claim just took.
                    RunLog.open(conn, item.run_id).event(
                        conn,
                        "task.reclaimed",
                        {
                            "previousWorker": item.previous_worker,
                            "worker": self.name,
                            "fencingToken": item.token,
                        },
                        now=now,
                        task_id=item.task_id,
                    )
        self._claimed_events(claimed)
        return claimed

    def _claimed_events(self, claimed: list[task_claims_repo.ClaimedTask]) -> None:
        for item in claimed:
            waited = (item.started_at.replace(tzinfo=None) - item.ready_at).total_seconds()
            self._events(
                "WorkerEvent",
                {
                    "worker": self.name,
                    "runId": item.run_id,
                    "taskId": item.task_id,
                    "state": "task.claimed",
                    "waitedMs": round(waited * 1000, 1),
                    **({"reclaimedFrom": item.previous_worker} if item.previous_worker else {}),
                },
            )

    async def _execute_task(self, claimed: task_claims_repo.ClaimedTask) -> None:
        from agentctl.engine.run.claimed_tasks import execute_claimed

        options = self._claimed_task_options()
        data: dict[str, Any] = {
            "worker": self.name,
            "runId": claimed.run_id,
            "taskId": claimed.task_id,
        }
        timings: dict[str, float] = {}
        try:
            state = await execute_claimed(
                self.store,
                claimed,
                self._snapshots,
                clock=self.clock,
                options=options,
                timings=timings,
                heartbeat=self._heartbeat,
            )
            data.update(timings)
        except AgentctlError as exc:
            # Nothing was concluded about the task; its claim lapses and another worker
            # (or this one) executes it again, reusing whatever effects it confirmed.
            state = "error"
            data.update(code=exc.code, message=exc.message)
        self._events("WorkerEvent", {**data, "state": f"task.{state}"})

    def _claimed_task_options(self) -> ExecutionOptions:
        """What a claimed task is executed with. The environment and the owner id are this
        worker's, taken once (a copy of ``os.environ`` and a new owner id for each task
        cost more CPU than a statement, and a claimed task writes through its claim's
        fence, never as the run's owner); the provider pool is the task's own (a pool
        holds the providers of one workflow, by name)."""
        shared = self._task_basis
        if shared is None:
            shared = self._task_basis = (
                dict(os.environ),
                f"{ownership.new_owner_id()}:{self.name}",
            )
        environ, owner_id = shared
        return ExecutionOptions(
            environ=environ, owner_id=owner_id, faults=self._faults, pool=ProviderPool()
        )

    def _claim_or_wait(self, limit: int) -> list[tuple[str, str]]:
        """Claim; a lock held too long or a server restarting is reported and retried on
        the next round instead of stopping the worker (and the runs it executes)."""
        return self._or_wait(lambda: self._claim(limit), [])

    def _claim(self, limit: int) -> list[tuple[str, str]]:
        """Claim up to ``limit`` runs in one write transaction; ``(run id, owner id)``."""
        now = self.clock.now()
        claimed: list[tuple[str, str]] = []
        adopted: set[str] = set()
        # Scoped to no run: each candidate's lock is tried below, and a run whose write is
        # in flight (its previous owner's, an operator's) is passed by like a locked row.
        with self.store.write(locks.Locks()) as conn:
            candidates = run_queue.claimable_runs(
                conn, now, limit, interrupted=self.recover_interrupted
            )
            if len(candidates) < limit:
                # Parked runs whose answer arrived and whose owner is gone: the same rule
                # as the daemon's (store/adoption.py), claimed like any other run.
                parked = adoptable_parked_runs(conn, now, limit=limit - len(candidates), lock=True)
                adopted = {p.run_id for p in parked}
                candidates += [p.run_id for p in parked]
            for run_id in candidates:
                if not run_queue.try_run_lock(conn, run_id):
                    continue
                owner_id = f"{ownership.new_owner_id()}:{self.name}"
                try:
                    claim = ownership.claim(conn, run_id, owner_id, now)
                except BlockedError:
                    continue  # a live process on this host still executes it
                log = RunLog.open(conn, run_id)
                if claim.previous_owner:
                    log.event(
                        conn,
                        "run.taken_over",
                        {
                            "previousOwner": claim.previous_owner,
                            "fencingToken": claim.token,
                            "worker": self.name,
                        },
                        now=now,
                    )
                if run_id in adopted:
                    log.event(conn, "run.adopted", {"worker": self.name}, now=now)
                claimed.append((run_id, owner_id))
        for run_id, _ in claimed:
            state = "adopted" if run_id in adopted else "claimed"
            self._events("WorkerEvent", {"worker": self.name, "runId": run_id, "state": state})
        return claimed

    async def _execute(self, run_id: str, owner_id: str) -> None:
        from agentctl.engine.run.executor import RunExecutor

        options = ExecutionOptions(
            owner_id=owner_id, task_claims=self._task_claims, faults=self._faults
        )
        problem = await self._wakeups.listen_for_outcomes()
        if problem is not None:
            self._events(
                "WorkerEvent",
                {
                    "worker": self.name,
                    "runId": run_id,
                    "state": "waiting",
                    "code": "worker.outcomes_unheard",
                    "message": f"{problem}; the run's batches are read once a second",
                },
            )
        try:
            outcome = await RunExecutor(
                self.store, run_id, clock=self.clock, options=options
            ).execute()
        except AgentctlError as exc:
            # The run keeps what it recorded (a lost fence, a store error); the worker goes
            # on with other runs and says what happened to this one.
            self.report.runs[run_id] = "error"
            self._events(
                "WorkerEvent",
                {
                    "worker": self.name,
                    "runId": run_id,
                    "state": "error",
                    "code": exc.code,
                    "message": exc.message,
                },
            )
            if not isinstance(exc, OwnershipLostError):
                await self._give_back(run_id, owner_id, to_workers=exc.code in TRANSIENT_CODES)
            return
        except Exception as exc:  # noqa: BLE001 - one run's defect must not hold it forever
            self.report.runs[run_id] = "error"
            self._events(
                "WorkerEvent",
                {
                    "worker": self.name,
                    "runId": run_id,
                    "state": "error",
                    "code": "internal.error",
                    "message": f"{type(exc).__name__}: {exc}",
                },
            )
            await self._give_back(run_id, owner_id, to_workers=False)
            return
        self.report.runs[run_id] = outcome.state
        self._events("WorkerEvent", {"worker": self.name, "runId": run_id, "state": outcome.state})
        self._compensate_if_asked(outcome)

    async def _give_back(self, run_id: str, owner_id: str, *, to_workers: bool) -> None:
        """Never hold a run this worker no longer drives: a live worker's owner id keeps
        ``resume`` and every other worker away from the run. A run given up for a
        transient cause (a server restart) goes back to the workers, this one included;
        any other is left for ``agentctl resume`` (so no worker fails it over and over).
        Retried with backoff within the store's retry window."""
        delay, deadline = 0.05, time.monotonic() + retry_window_seconds()
        while True:
            try:
                with self.store.write(locks.run(run_id)) as conn:
                    given = run_queue.give_back(conn, run_id, owner_id, to_workers=to_workers)
                break
            except PersistenceError as exc:
                # Any store error, not only a transient one, is tried again in the window:
                # just after a restart the pool may answer with another error once.
                if isinstance(exc, OwnershipLostError) or time.monotonic() + delay > deadline:
                    self._events(
                        "WorkerEvent",
                        {
                            "worker": self.name,
                            "runId": run_id,
                            "state": "error",
                            "code": exc.code,
                            "message": f"the run could not be given back: {exc.message}",
                        },
                    )
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        if given:
            self._events("WorkerEvent", {"worker": self.name, "runId": run_id, "state": "released"})

    def _compensate_if_asked(self, outcome: RunOutcome) -> None:
        """``spec.compensation.onFailure: automatic``: the compensation run is released
        to the workers like a detached run (this worker or another one executes it)."""
        if outcome.state != "failed":
            return
        from agentctl.engine.recovery.compensation import compensate_automatically

        with self.store.read() as conn:
            run = load_run(conn, outcome.run_id)
        try:
            created = compensate_automatically(self.store, run, clock=self.clock)
        except AgentctlError as exc:
            self._events(
                "WorkerEvent",
                {"worker": self.name, "runId": run.id, "state": "error", "code": exc.code},
            )
            return
        if created is not None:
            with self.store.write(locks.run(created)) as conn:
                run_queue.release_to_workers(conn, created)


async def wait_for_run(store: Store, run_id: str) -> str:
    """Block until ``run_id`` is finished or parked; its state. On PostgreSQL a
    notification wakes the wait; on SQLite the run is looked at twice a second."""
    listener = await run_queue.RunsListener.open(store) if store.dialect == "postgresql" else None
    # Woken only by this run's status changes, not by the task traffic of every run (a
    # fan-out sends a notification per task); the periodic look stays as a safety net.
    wake = listener.subscribe(frozenset({run_id})) if listener is not None else None
    try:
        while True:
            with store.read() as conn:
                state = run_queue.run_status(conn, run_id)
            if state is None:
                load_run_or_raise(store, run_id)
            if state in SETTLED_STATES:
                return str(state)
            if wake is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), IDLE_SECONDS)
                wake.clear()
            else:
                await asyncio.sleep(IDLE_SECONDS / 2)
    finally:
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.close()


def load_run_or_raise(store: Store, run_id: str) -> None:
    """Raise the store's ``unknown run`` error (exit 5, with its hint)."""
    with store.read() as conn:
        load_run(conn, run_id)
