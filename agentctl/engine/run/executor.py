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
import heapq
import sys
from collections.abc import Callable, Mapping
from datetime import UTC
from pathlib import Path
from typing import Any

from agentctl.compiler.plan import PlanTask
from agentctl.digest import digest_json
from agentctl.engine.effects.gate import Attempt, EffectGate
from agentctl.engine.run import deadlines, retrying, tracing
from agentctl.engine.run.artifacts import RunArtifacts
from agentctl.engine.run.collector import settle_long_lived
from agentctl.engine.run.commits import RunCommits, TaskOutcome
from agentctl.engine.run.context import TaskEnv, TaskResult
from agentctl.engine.run.frontier import TaskOutputs, load_frontier, take_handed
from agentctl.engine.run.outcome import ExecutionOptions, RunOutcome, finished_outcome
from agentctl.engine.run.prediction import Prediction
from agentctl.engine.run.records import (
    TERMINAL_RUN_STATES,
    TERMINAL_TASK_STATES,
    RunLog,
    load_run,
    replay_memory,
)
from agentctl.engine.run.tasks import (
    check_contract,
    loop_exit_guard,
    run_body,
    when_condition,
    when_skip_output,
)
from agentctl.engine.run.watchers import RunWatchers
from agentctl.errors import AgentctlError, Cancelled, OwnershipLostError, PersistenceError
from agentctl.ids import Clock
from agentctl.policy.paths import WorkspacePolicy
from agentctl.policy.secrets import secret_sources
from agentctl.signals import (
    ApprovalPending,
    EffectBlocked,
    FreshAttempt,
    TaskFailure,
    as_task_failure,
)
from agentctl.spec.template_exceptions import TemplateError
from agentctl.spec.templates import render
from agentctl.store import locks, ownership
from agentctl.store.engine import Store
from agentctl.store.records import check_run_records
from agentctl.store.states import check_run_transition

__all__ = ["ExecutionOptions", "RunExecutor", "RunOutcome", "finished_outcome"]

EventSink = Callable[[str, dict[str, Any]], None]
Sleep = Callable[[float], Any]


# Records the run cannot read: the run stops (exit 5, still resumable once the database
# is repaired) instead of recording a task failure it cannot vouch for.

_WAITING = frozenset({"running", "waiting_for_approval", "waiting_for_effect"})


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
            plan, rows, self.frontier = load_frontier(
                conn,
                self.run_id,
                run.plan,
                lambda: self._session,
                take_handed(self.store.path, self.run_id),
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
        self.artifacts.writer = self.owned
        self.run = run
        self.plan = plan
        self.rows = rows
        self.memory = memory
        self.spec = spec
        self.outputs = TaskOutputs(rows)
        policy = dict(spec.get("policy") or {})
        base_dir = Path(opts.workspace or run.workspace or ".")
        self.workspace = WorkspacePolicy(
            base_dir,
            str(policy.get("workspaceRoot") or "."),
            list(policy.get("writableRoots") or []),
        )
        self.base_dir = base_dir
        self.gate = EffectGate(
            self.owned,
            self.log,
            self.clock,
            policy=policy,
            faults=opts.faults,
            approver=deadlines.excluding_person_waits(opts.approver),
            on_task_running=self._mark_running,
            approval_mode=self._compensation_approval(),
        )
        runtime = spec.get("runtime") or {}
        self.default_timeout = int(runtime.get("defaultTimeoutSeconds") or 120)
        opts.faults.hit("run.created")
        session_scope = contextlib.ExitStack()
        self._session = session_scope.enter_context(self.owned.driver_session())
        session_scope.enter_context(secret_sources(self.workspace.workspace_root, policy))
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

    def _compensation_approval(self) -> str | None:
        """A compensation run's approval: keep the policy, remove the gate, or always ask."""
        if self.run.mode != "compensate":
            return None
        setting = str((self.spec.get("compensation") or {}).get("approval") or "policy")
        return {"never": "never", "always": "always"}.get(setting)

    # -- the loop ----------------------------------------------------------------------

    async def _drive(self) -> RunOutcome:
        # For a live view in this process: every task and where it stands (a resumed run
        # has some done already). It reads every task's row, so only when someone watches;
        # in-process progress only, nothing is persisted for it.
        if self.options.events is not None:
            self._emit(
                "started", {"tasks": {tid: self.rows[tid].status for tid in self.plan.order}}
            )
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
            decided = self._pre_check(task, snapshot)
            if isinstance(decided, TaskOutcome):
                outcomes[tid] = decided
            else:
                runnable.append((task, *decided))
        if len(runnable) == 1:
            task, task_vars, condition = runnable[0]
            outcomes[task.id] = await self._run_task(task, task_vars, snapshot, condition)
        elif runnable and self.options.task_claims is not None:
            # PostgreSQL workers: the batch spreads over workers (engine/run/task_claims.py).
            outcomes.update(await self.options.task_claims.run_batch(self, runnable))
        elif runnable:
            results = await asyncio.gather(
                *(
                    self._run_task(task, task_vars, snapshot, condition)
                    for task, task_vars, condition in runnable
                )
            )
            for (task, _, _), result in zip(runnable, results, strict=True):
                outcomes[task.id] = result
        return outcomes

    # -- one task ----------------------------------------------------------------------

    def _pre_check(
        self, task: PlanTask, memory: Mapping[str, Any]
    ) -> TaskOutcome | tuple[dict[str, Any], dict[str, Any] | None]:
        """Skip rules of docs/running.md, then the rendered vars the task will run with and the
        condition decision (``when`` or loop guard) that let it run, if it has one.

        A task that already started (waiting for approval or an effect) is not decided
        again: its decision was recorded when it first ran."""
        row = self.rows[task.id]
        if row.status in _WAITING:
            return self._render_vars(task, memory), None
        aggregate = task.uses.kind in ("aggregate", "loop_aggregate", "subworkflow_aggregate")
        if not aggregate:
            for need in task.needs:
                if self.rows[need].status != "succeeded":
                    return TaskOutcome(
                        "skipped",
                        row.attempt,
                        error={
                            "code": "dependency.not_succeeded",
                            "message": f"dependency did not succeed: {need} is "
                            f"{self.rows[need].status}",
                        },
                    )
        try:
            task_vars = self._render_vars(task, memory)
            for guard in task.route_guards:
                route = self.outputs.get(guard.router) or {}
                if task.id not in (route.get("destinations") or []):
                    return TaskOutcome(
                        "skipped",
                        row.attempt,
                        has_output=True,
                        output={
                            "reason": "route not selected",
                            "route": {
                                "router": guard.router,
                                "selected": route.get("selected"),
                                "matched": route.get("matched"),
                            },
                        },
                    )
            condition: dict[str, Any] | None = None
            if task.when is not None:
                condition = when_condition(task, self._context(task_vars, memory))
                if not condition["result"]:
                    return TaskOutcome(
                        "skipped",
                        row.attempt,
                        has_output=True,
                        output=when_skip_output(condition),
                        condition=condition,
                    )
            elif task.uses.kind == "loop_aggregate":
                condition = loop_exit_guard(task, self.rows, self._context(task_vars, memory))
        except TemplateError as exc:
            predicted = self._unpredictable(task, exc)
            if predicted is not None:
                return predicted
            # Unlike upstream (docs/running.md): a template error in vars/when fails the
            # task, not the run driver, so the run ends in a truthful state instead of
            # stranding `running`.
            return TaskOutcome(
                "failed",
                row.attempt + 1,
                error={"code": "template.error", "message": f"task {task.id}: {exc}"},
            )
        return task_vars, condition

    def _unpredictable(self, task: PlanTask, exc: TemplateError) -> TaskOutcome | None:
        """In check mode, a task that cannot render an unpredicted dependency's output is
        itself unpredicted rather than failed."""
        if self.prediction is None:
            return None
        output = self.prediction.placeholder(task.id, exc)
        if output is None:
            return None
        return TaskOutcome(
            "succeeded", self.rows[task.id].attempt + 1, output=output, has_output=True
        )

    def _render_vars(self, task: PlanTask, memory: Mapping[str, Any]) -> dict[str, Any]:
        rendered = render(dict(task.vars), self._context({}, memory))
        return dict(rendered) if isinstance(rendered, Mapping) else {}

    async def _run_task(
        self,
        task: PlanTask,
        task_vars: dict[str, Any],
        memory: Mapping[str, Any],
        condition: dict[str, Any] | None,
    ) -> TaskOutcome:
        outcome = await self._attempts(task, task_vars, memory, condition)
        outcome.condition = condition
        return outcome

    async def _attempts(
        self,
        task: PlanTask,
        task_vars: dict[str, Any],
        memory: Mapping[str, Any],
        condition: dict[str, Any] | None,
    ) -> TaskOutcome:
        row = self.rows[task.id]
        attempt_no = row.attempt if row.status in _WAITING and row.attempt else row.attempt + 1
        attempts_used = 0
        while True:
            attempts_used += 1
            attempt = Attempt(self.run_id, task.id, attempt_no)
            self._emit("task.started", {"taskId": task.id, "attempt": attempt_no})
            try:
                context = self._context(task_vars, memory)
                rendered = render(dict(task.input), context)
                env = TaskEnv(
                    run_id=self.run_id,
                    task=task,
                    attempt=attempt,
                    input=rendered,
                    vars=task_vars,
                    memory=memory,
                    workflow=self.run.workflow,
                    gate=self.gate,
                    workspace=self.workspace,
                    base_dir=self.base_dir,
                    environ=self.options.environ,
                    check=self.options.check,
                    diff=self.options.diff,
                    max_concurrency=self.plan.max_concurrency,
                    default_timeout_seconds=self.default_timeout,
                    compensation=self.run.mode == "compensate",
                    run_created_at=self.run.created_at.replace(tzinfo=UTC),
                    condition=condition,
                )
                result: TaskResult = await tracing.traced_attempt(
                    self.trace,
                    task,
                    attempt,
                    deadlines.bounded(
                        run_body(env, self.rows, context, self.options.pool),
                        seconds=task.timeout_seconds,
                        store=self.store,
                        attempt=attempt,
                    ),
                )
                if not self.options.check:
                    check_contract(task, result.output)
                ingested = (
                    []
                    if self.options.check
                    else await self.artifacts.ingest(task, attempt_no, env.written, self.workspace)
                )
                return TaskOutcome(
                    "succeeded",
                    attempt_no,
                    output=result.output,
                    has_output=True,
                    memory_delta=result.memory_delta,
                    # Repair compares it: a task is reusable only with the same inputs.
                    input_digest=digest_json(rendered),
                    effect_ids=list(attempt.effect_ids),
                    artifacts=ingested,
                )
            except ApprovalPending as pending:
                return TaskOutcome(
                    "waiting_for_approval",
                    attempt_no,
                    approval=pending.approval_id,
                    error=pending.task_error(),
                )
            except EffectBlocked as blocked:
                return TaskOutcome(
                    "waiting_for_effect",
                    attempt_no,
                    blocked=blocked,
                    error={
                        "code": "effect.uncertain",
                        "message": f"effect {blocked.effect_id} ({blocked.operation}) is uncertain",
                    },
                )
            except FreshAttempt:
                attempt_no += 1
                attempts_used -= 1
                continue
            except TemplateError as exc:
                predicted = self._unpredictable(task, exc)
                if predicted is not None:
                    return predicted
                failure = TaskFailure(f"task {task.id}: {exc}", code="template.error")
            except TaskFailure as exc:
                failure = exc
            except PersistenceError:
                # The store could not record something (lost ownership, a held lock, a full
                # disk): nothing about the task is concluded; the run stays resumable.
                raise
            except AgentctlError as exc:
                failure = as_task_failure(exc)
            if attempts_used < task.retry.max_attempts and not retrying.not_retried_reason(
                task.retry, failure
            ):
                await self._wait_to_retry(task, attempt, failure, attempts_used)
                attempt_no += 1
                continue
            return TaskOutcome(
                "failed", attempt_no, error=failure.to_json(), stops_run=failure.stops_run
            )

    async def _wait_to_retry(
        self, task: PlanTask, attempt: Attempt, failure: TaskFailure, retry_number: int
    ) -> None:
        """Record the failed attempt and the wait (``inspect`` shows both), then wait."""
        seconds = retrying.wait_seconds(
            task.retry,
            retry_number=retry_number,
            seed=f"{self.run_id}\0{task.id}\0{attempt.attempt}",
            failure=failure,
        )
        now = self.clock.now()
        with self._session.write() as conn:
            self.log.event(
                conn,
                "task.retry_scheduled",
                {
                    "failedAttempt": attempt.attempt,
                    "nextAttempt": attempt.attempt + 1,
                    "error": failure.to_json(),
                    "waitMs": round(seconds * 1000),
                },
                now=now,
                task_id=task.id,
            )
        if seconds:
            await self.options.sleep(seconds)

    def _mark_running(self, conn: Any, attempt: Attempt) -> None:
        row = self.rows[attempt.task_id]
        if row.status == "running" and row.attempt == attempt.attempt:
            return
        values: dict[str, Any] = {"status": "running", "attempt": attempt.attempt}
        if row.attempt == 0:
            values["started_at"] = self.clock.now()  # the first start of the task
        self.log.set_task(conn, attempt.task_id, **values)
        row.status, row.attempt = "running", attempt.attempt
