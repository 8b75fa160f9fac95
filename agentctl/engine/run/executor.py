"""The scheduler: drives one run's plan to a terminal, paused or blocked state.

Ready tasks (all ``needs`` terminal) run in stable batches of ``runtime.maxConcurrency`` in
plan order. Each task in a batch reads the same immutable working-memory snapshot; their
transitions commit together in one transaction, in plan order, so the same records always
yield the same checkpoints. A task that waits for a person parks the run (``paused``,
exit 3); an effect whose outcome is unknown blocks it until reconciled (exit 3); a
``failure: stop`` task that fails ends it (``failed``, exit 4). Cancellation (durable flag,
SIGINT/SIGTERM, deadline) stops owned work and leaves every effect in a truthful state.

The executor's writes (task transitions, finishing and parking the run) are in
``engine.run.commits``; the cancel/deadline watcher and the lease heartbeat in
``engine.run.watchers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from agentctl.compiler.plan import PlanTask
from agentctl.engine.core.records import (
    TERMINAL_RUN_STATES,
    TERMINAL_TASK_STATES,
    Attempt,
    RunLog,
    load_run,
    replay_memory,
)
from agentctl.engine.effects import tracing
from agentctl.engine.run import deadlines
from agentctl.engine.run.artifacts import RunArtifacts
from agentctl.engine.run.attempts import TaskAttempts
from agentctl.engine.run.collector import settle_long_lived
from agentctl.engine.run.commits import RunCommits
from agentctl.engine.run.frontier import TaskOutputs, load_frontier, take_handed
from agentctl.engine.run.outcome import ExecutionOptions, RunOutcome, TaskOutcome, finished_outcome
from agentctl.engine.run.prediction import Prediction
from agentctl.engine.run.tasks import never_waits
from agentctl.engine.run.watchers import RunWatchers
from agentctl.errors import AgentctlError, Cancelled, OwnershipLostError
from agentctl.ids import Clock
from agentctl.policy.secrets import secret_sources
from agentctl.signals import (
    EffectBlocked,
)
from agentctl.store import checkpoints_repo, locks, ownership
from agentctl.store.engine import Store
from agentctl.store.records import check_run_records
from agentctl.store.states import check_run_transition

__all__ = ["ExecutionOptions", "RunExecutor", "RunOutcome", "finished_outcome"]

EventSink = Callable[[str, dict[str, Any]], None]
Sleep = Callable[[float], Any]


class RunExecutor(RunCommits, RunWatchers):
    def __init__(
        self, store: Store, run_id: str, *, clock: Clock, options: ExecutionOptions | None = None
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.clock = clock
        self.options = options or ExecutionOptions()
        self._cancel_reason: str | None = None
        self._deadline_passed = False
        self._released = False
        self._with_batch = None
        self.artifacts = RunArtifacts(store, clock, run_id)
        self._last_cancel_check = float("-inf")
        self._lost: OwnershipLostError | None = None

    # -- entry -------------------------------------------------------------------------

    async def execute(self) -> RunOutcome:
        settle_long_lived()  # the first run of the process: later collections skip imports
        opts = self.options
        # No separate read for a finished run: the claim's transaction reads the run row
        # anyway, and answers a finished one without writing (``drive_run`` answers a
        # re-submitted run from one read before it makes an executor).
        # At the driver, like the run's later writes: the claim is a dozen statements.
        with (
            self.store.driver_session(scope=locks.run(self.run_id)) as claiming,
            claiming.write() as conn,
        ):
            run = load_run(conn, self.run_id)
            if run.status in TERMINAL_RUN_STATES:
                return RunOutcome(run.id, run.status, run.output, run.error)
            check_run_records(conn, self.run_id)
            claimed = ownership.claim(conn, self.run_id, opts.owner_id, self.clock.now())
            check_run_transition(run.id, run.status, "running")
            recorded = checkpoints_repo.last_seq(conn, self.run_id)
            plan, rows, self.frontier = load_frontier(
                conn,
                self.run_id,
                run.plan,
                lambda: self._session,
                take_handed(self.store.path, self.run_id),
                # The run's first claim, and no task transition recorded (each writes a
                # checkpoint; so does a repair's copy of a reused task): its rows are as
                # creation wrote them.
                untouched=claimed.token == 1 and recorded is None,
            )
            self.prediction = None
            if opts.check:
                self.prediction = Prediction(plan.whole(conn))
                for task_id, row in rows.every(conn).items():
                    if row.has_output:
                        self.prediction.observe(task_id, row.output)
            spec = run.workflow.get("spec") or {}
            memory = replay_memory(
                conn, self.run_id, (spec.get("memory") or {}).get("working") or {}
            )
            self.log = RunLog.open(conn, self.run_id)
            self.trace = tracing.RunTrace.begin(conn, self.log, run, opts.environ)
            if run.status != "running":
                self.log.set_run(conn, status="running", updated_at=self.clock.now())
                self.log.event(conn, "run.resumed", {"from": run.status}, now=self.clock.now())
            if claimed.previous_owner:
                self.log.event(
                    conn,
                    "run.taken_over",
                    {"previousOwner": claimed.previous_owner, "fencingToken": claimed.token},
                    now=self.clock.now(),
                )
        if not run.cancel_requested:
            # The flag was just read in the claim's transaction: the first batch need not
            # read it again (a request made since is seen at the next poll, as before).
            self._last_cancel_check = self.clock.monotonic()
        # From here on every write of this execution is fenced by the claim's token.
        self.owned = ownership.OwnedRun(self.store, claimed)
        self.run = run
        self.plan = plan
        self.rows = rows
        self.memory = memory
        self.spec = spec
        self.outputs = TaskOutputs(rows, plan.task_count)
        # The one task-attempt path (engine/run/attempts.py), writing through the claim.
        self.attempts = TaskAttempts(
            run=run,
            plan=plan,
            rows=rows,
            outputs=self.outputs,
            writer=self.owned,
            log=self.log,
            trace=self.trace,
            clock=self.clock,
            options=opts,
            artifacts=self.artifacts,
            session=lambda: self._session,
            approver=deadlines.excluding_person_waits(opts.approver),
            on_task_running=self._mark_running,
            prediction=self.prediction,
        )
        opts.faults.hit("run.created")
        session_scope = contextlib.ExitStack()
        self._session = session_scope.enter_context(self.owned.driver_session())
        session_scope.enter_context(
            secret_sources(self.attempts.workspace.workspace_root, self.attempts.policy)
        )
        drive = asyncio.create_task(self._drive(), context=self.trace.context())
        watcher = asyncio.create_task(self._watch_cancel(drive))
        heartbeat = asyncio.create_task(self._heartbeat(drive))
        try:
            return await drive
        except (asyncio.CancelledError, Cancelled) as stop:
            if self._lost is not None:
                raise self._lost from None
            reason = (
                stop.reason
                if isinstance(stop, Cancelled)
                # A cancel request's reason, else the message the canceller gave the task
                # (the CLI's signal handlers and --timeout-seconds say what stopped it).
                else (self._cancel_reason or next(iter(stop.args), None) or "interrupted")
            )
            if self._deadline_passed:
                # The wall-time budget counts from run creation; when it runs out, in-flight
                # work is cancelled (its effects recorded as uncertain) and the run fails.
                error = {
                    "code": "budget.wall_time_exceeded",
                    "message": f"{reason}; in-flight work was cancelled",
                }
                self._finish_run("failed", error=error)
                return RunOutcome(self.run_id, "failed", None, error)
            self._finish_run("cancelled", error={"code": "run.cancelled", "message": reason})
            raise Cancelled(reason, run_id=self.run_id) from None
        finally:
            for helper in (watcher, heartbeat):
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper
            session_scope.close()
            self.artifacts.close()
            self.trace.close(sys.exc_info()[1])  # ends the span if no state was reached
            if not self._released:
                with (
                    contextlib.suppress(AgentctlError),
                    self.store.write(locks.run(self.run_id)) as conn,
                ):
                    ownership.release(conn, self.run_id, self.owned.token)
            if self._lost is not None:
                raise self._lost

    # -- the loop ----------------------------------------------------------------------

    async def _drive(self) -> RunOutcome:
        # For a live view in this process: every task and where it stands (a resumed run
        # has some done already). It reads every task's row (one query, not one per
        # finished task), so only when someone watches; in-process progress only, nothing
        # is persisted for it.
        if self.options.events is not None:
            order = self.plan.order
            rows = self.rows if self.rows.holds(order) else self.rows.every()
            self._emit("started", {"tasks": {tid: rows[tid].status for tid in order}})
        # Only the tasks not finished yet take part: a need outside them is terminal.
        frontier = self.frontier
        position = {tid: self.rows[tid].ordinal for tid in frontier}
        at = {index: tid for tid, index in position.items()}
        dependents: dict[str, list[str]] = {tid: [] for tid in frontier}
        unmet: dict[str, int] = {}
        for tid in frontier:
            unmet[tid] = 0
            for need in self.plan.tasks[tid].needs:
                if need in dependents:
                    dependents[need].append(tid)
                    unmet[tid] += 1
        # Ready tasks in plan order: a heap of plan positions (stable batches, docs/compiler.md).
        ready = [position[t] for t in frontier if unmet[t] == 0]
        heapq.heapify(ready)
        concurrency = max(1, self.plan.max_concurrency)
        while True:
            self._check_cancel_and_deadline(force=False)
            if not ready:
                break
            batch = [at[heapq.heappop(ready)] for _ in range(min(concurrency, len(ready)))]
            outcomes = await self._run_batch(batch)
            stop = False
            waiting: list[str] = []
            blocked: list[EffectBlocked] = []
            # What the batch leads to is known before it commits (a task's row takes its
            # outcome's state), so the last batch can commit with the run's completion.
            for tid in batch:
                outcome = outcomes[tid]
                if outcome.status in TERMINAL_TASK_STATES:
                    for child in dependents.get(tid, ()):
                        unmet[child] -= 1
                        if unmet[child] == 0 and not self.rows[child].terminal:
                            heapq.heappush(ready, position[child])
                if outcome.status == "failed" and (
                    outcome.stops_run or self.plan.tasks[tid].failure == "stop"
                ):
                    stop = True
                if outcome.approval:
                    waiting.append(outcome.approval)
                if outcome.blocked:
                    blocked.append(outcome.blocked)
            items = [(self.plan.tasks[tid], outcomes[tid]) for tid in batch]
            if not (ready or stop or blocked or waiting):
                # The run ends with this batch, unless a cancel request or the deadline
                # stops it here as it would before another batch.
                try:
                    self._check_cancel_and_deadline(force=False)
                except Cancelled:
                    self._commit_batch(items)
                    raise
                return self._commit_last_batch(items)
            self._commit_batch(items)
            if stop:
                error = next(
                    (
                        outcomes[t].error
                        for t in batch
                        if outcomes[t].status == "failed" and outcomes[t].error
                    ),
                    None,
                )
                self._finish_run("failed", error=error)
                return RunOutcome(self.run_id, "failed", None, error)
            if blocked:
                return self._park_blocked(blocked)
            if waiting:
                return self._park_waiting(waiting)
        return self._complete()

    async def _run_batch(self, batch: list[str]) -> dict[str, TaskOutcome]:
        snapshot = dict(self.memory)
        outcomes: dict[str, TaskOutcome] = {}
        runnable: list[tuple[PlanTask, dict[str, Any], dict[str, Any] | None]] = []
        for tid in batch:
            task = self.plan.tasks[tid]
            decided = self.attempts.pre_check(task, snapshot)
            if isinstance(decided, TaskOutcome):
                outcomes[tid] = decided
            else:
                runnable.append((task, *decided))
        if len(runnable) == 1:
            task, task_vars, condition = runnable[0]
            outcomes[task.id] = await self.attempts.run_task(task, task_vars, snapshot, condition)
        elif runnable and self.options.task_claims is not None:
            # PostgreSQL workers: the batch spreads over workers (engine/run/task_claims.py).
            outcomes.update(await self.options.task_claims.run_batch(self, runnable))
        elif runnable and all(never_waits(task, self.spec) for task, _, _ in runnable):
            outcomes.update(await self._run_in_place(runnable, snapshot))
        elif runnable:
            results = await asyncio.gather(
                *(
                    self.attempts.run_task(task, task_vars, snapshot, condition)
                    for task, task_vars, condition in runnable
                )
            )
            for (task, _, _), result in zip(runnable, results, strict=True):
                outcomes[task.id] = result
        return outcomes

    async def _run_in_place(
        self,
        runnable: list[tuple[PlanTask, dict[str, Any], dict[str, Any] | None]],
        snapshot: dict[str, Any],
    ) -> dict[str, TaskOutcome]:
        """A batch of attempts whose bodies never wait (``tasks.never_waits``: a fan-out
        of builtin steps, aggregates), each started here, in batch order, as ``gather``
        would start them in its tasks, but without an asyncio task each: most finish in
        that first step. One that waits (a retry's pause) goes on in a task of its own,
        from where it stopped and in the same context; the batch then waits for those as
        ``gather`` does. Each attempt runs in a copy of this task's context, as in a task.
        The driver still lets the loop run once per batch (the cancel watcher and the
        lease's heartbeat get their turn, as they did while ``gather`` waited)."""
        loop = asyncio.get_running_loop()
        outcomes: dict[str, TaskOutcome] = {}
        going_on: list[tuple[str, asyncio.Future[TaskOutcome]]] = []
        for task, task_vars, condition in runnable:
            context = contextvars.copy_context()
            attempt = self.attempts.run_task(task, task_vars, snapshot, condition)
            try:
                step = context.run(attempt.send, None)
            except StopIteration as finished:
                outcomes[task.id] = finished.value
                continue
            except Exception as exc:  # noqa: BLE001 - gather below raises it, as a task's
                failed: asyncio.Future[TaskOutcome] = loop.create_future()
                failed.set_exception(exc)
                going_on.append((task.id, failed))
                continue
            going_on.append((task.id, loop.create_task(_go_on(attempt, step), context=context)))
        if going_on:
            results = await asyncio.gather(*(future for _, future in going_on))
            outcomes.update(zip((task_id for task_id, _ in going_on), results, strict=True))
        else:
            await asyncio.sleep(0)
        return {task.id: outcomes[task.id] for task, _, _ in runnable}

    def _mark_running(self, conn: Any, attempt: Attempt) -> None:
        row = self.rows[attempt.task_id]
        if row.status == "running" and row.attempt == attempt.attempt:
            return
        values: dict[str, Any] = {"status": "running", "attempt": attempt.attempt}
        if row.attempt == 0:
            values["started_at"] = self.clock.now()  # the first start of the task
        self.log.set_task(conn, attempt.task_id, **values)
        row.status, row.attempt = "running", attempt.attempt


async def _go_on(attempt: Coroutine[Any, Any, TaskOutcome], step: Any) -> TaskOutcome:
    """Go on with an attempt started in place whose first step yielded ``step``."""
    return await deadlines.resumed(attempt, step)
