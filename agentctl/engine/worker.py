"""``agentctl worker``: execute runs released to workers on a PostgreSQL store.

A worker claims runs whose lease has expired — released by ``roll --detach``, or left by
an owner that died — and executes each exactly as ``agentctl resume`` would, up to
``concurrency`` at a time, in one asyncio loop. Claiming is one write transaction:
``SELECT … FOR UPDATE SKIP LOCKED`` picks the rows, and :func:`ownership.claim` takes each
run with a fresh fencing token under the owner id the execution then uses. From there the
ordinary executor holds the run: its heartbeat renews the lease, every write is fenced, the
effect protocol is the one of a single process. So two workers never execute one run at
once, and a worker that lost its run (stopped past its lease, cut off from the database)
fails its next write instead of overwriting the new owner's.

Idle, a worker waits on ``LISTEN agentctl_runs`` and looks for work at most about once a
second. Stopping (:meth:`Worker.stop`, SIGTERM/SIGINT in the CLI) drains: no new claims;
the runs in hand finish or park; then :meth:`Worker.serve` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentctl.engine.outcome import ExecutionOptions, RunOutcome
from agentctl.engine.records import RunLog, load_run
from agentctl.errors import AgentctlError, BlockedError, PersistenceError, UsageError
from agentctl.ids import Clock, IdGenerator
from agentctl.store import ownership, run_queue
from agentctl.store.adoption import adoptable_parked_runs
from agentctl.store.engine import Store
from agentctl.store.errors import TRANSIENT_CODES

__all__ = ["Worker", "WorkerReport", "detach_run", "require_postgres", "wait_for_run"]

#: The longest an idle worker (or ``runs wait``) goes without looking at the database.
IDLE_SECONDS = 1.0

#: Run states ``runs wait`` returns on: finished, or parked until a person acts.
SETTLED_STATES = frozenset({"succeeded", "failed", "cancelled", "paused"})

Events = Callable[[str, dict[str, Any]], None]


def require_postgres(store: Store, what: str) -> None:
    if store.dialect != "postgresql":
        raise UsageError(
            f"{what} needs a PostgreSQL database (--db postgresql://…): workers share runs "
            "through it; a SQLite file is used by one process at a time",
            code="worker.needs_postgres",
            hint="drop --detach to run the workflow in this process, or point --db at "
            "PostgreSQL (see docs/postgresql.md)",
        )


def detach_run(store: Store, run_id: str) -> None:
    """Release a just-created run to the workers (it has no owner yet)."""
    require_postgres(store, "roll --detach")
    with store.write() as conn:
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
        self.report = WorkerReport(name)
        self._events = events or (lambda _kind, _data: None)
        self._stopping: asyncio.Event | None = None

    def stop(self) -> None:
        """Stop claiming; :meth:`serve` returns once the runs in hand finish or park."""
        if self._stopping is not None:
            self._stopping.set()

    async def serve(self) -> WorkerReport:
        self._stopping = asyncio.Event()
        listener = await run_queue.RunsListener.open(self.store)
        active: set[asyncio.Task[None]] = set()
        self._events("WorkerEvent", {"worker": self.name, "state": "ready"})
        try:
            while not self._stopping.is_set():
                free = self.concurrency - len(active)
                for run_id, owner_id in self._claim_or_wait(free) if free > 0 else []:
                    active.add(asyncio.create_task(self._execute(run_id, owner_id)))
                waiters: set[asyncio.Future[Any]] = {
                    asyncio.ensure_future(listener.wait(IDLE_SECONDS)),
                    asyncio.ensure_future(self._stopping.wait()),
                }
                await asyncio.wait(waiters | active, return_when=asyncio.FIRST_COMPLETED)
                for waiter in waiters:
                    waiter.cancel()
                active = {task for task in active if not task.done()}
            self._events("WorkerEvent", {"worker": self.name, "state": "draining"})
            if active:
                await asyncio.wait(active)
        finally:
            await listener.close()
        self._events("WorkerEvent", {"worker": self.name, "state": "stopped"})
        return self.report

    def _claim_or_wait(self, limit: int) -> list[tuple[str, str]]:
        """Claim; a lock held too long or a server restarting is reported and retried on
        the next round instead of stopping the worker (and the runs it executes)."""
        try:
            return self._claim(limit)
        except PersistenceError as exc:
            if exc.code not in TRANSIENT_CODES:
                raise
            self._events(
                "WorkerEvent",
                {"worker": self.name, "state": "waiting", "code": exc.code, "message": exc.message},
            )
            return []

    def _claim(self, limit: int) -> list[tuple[str, str]]:
        """Claim up to ``limit`` runs in one write transaction; ``(run id, owner id)``."""
        now = self.clock.now()
        claimed: list[tuple[str, str]] = []
        adopted: set[str] = set()
        with self.store.write() as conn:
            candidates = run_queue.claimable_runs(conn, now, limit)
            if len(candidates) < limit:
                # Parked runs whose answer arrived and whose owner is gone: the same rule
                # as the daemon's (store/adoption.py), claimed like any other run.
                parked = adoptable_parked_runs(conn, now, limit=limit - len(candidates), lock=True)
                adopted = {p.run_id for p in parked}
                candidates += [p.run_id for p in parked]
            for run_id in candidates:
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
        from agentctl.engine.executor import RunExecutor

        options = ExecutionOptions(owner_id=owner_id)
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
            return
        self.report.runs[run_id] = outcome.state
        self._events("WorkerEvent", {"worker": self.name, "runId": run_id, "state": outcome.state})
        self._compensate_if_asked(outcome)

    def _compensate_if_asked(self, outcome: RunOutcome) -> None:
        """``spec.compensation.onFailure: automatic``: the compensation run is released
        to the workers like a detached run (this worker or another one executes it)."""
        if outcome.state != "failed":
            return
        from agentctl.engine.compensation import create_compensation_run, plan_compensation

        with self.store.read() as conn:
            run = load_run(conn, outcome.run_id)
        setting = ((run.workflow.get("spec") or {}).get("compensation") or {}).get("onFailure")
        if run.mode == "compensate" or setting != "automatic":
            return
        try:
            plan = plan_compensation(self.store, run.id)
            created = create_compensation_run(
                self.store, plan, clock=self.clock, ids=IdGenerator(self.clock)
            )
        except AgentctlError as exc:
            self._events(
                "WorkerEvent",
                {"worker": self.name, "runId": run.id, "state": "error", "code": exc.code},
            )
            return
        if created is not None:
            with self.store.write() as conn:
                run_queue.release_to_workers(conn, created)


async def wait_for_run(store: Store, run_id: str) -> str:
    """Block until ``run_id`` is finished or parked; its state. On PostgreSQL a
    notification wakes the wait; on SQLite the run is looked at twice a second."""
    listener = await run_queue.RunsListener.open(store) if store.dialect == "postgresql" else None
    try:
        while True:
            with store.read() as conn:
                state = run_queue.run_status(conn, run_id)
            if state is None:
                load_run_or_raise(store, run_id)
            if state in SETTLED_STATES:
                return str(state)
            if listener is not None:
                await listener.wait(IDLE_SECONDS)
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
