"""One task-attempt path: the attempt loop of a task and everything it is executed with.

Built from a run snapshot (the run row, its plan, the task rows and outputs) and a fenced
writer (:class:`~agentctl.store.ownership.OwnedRun` for the run's owner, the claim's fence
for a worker executing one claimed task), a :class:`TaskAttempts` holds the shared setup —
the workspace policy, the effect gate, the default timeout (the spec model's default when
the workflow sets none), artifact ingestion and tracing — and runs a task: the skip rules
and rendered vars (:meth:`TaskAttempts.pre_check`), then attempts, retry waits and the
outcome (:meth:`TaskAttempts.run_task`). The in-process executor (``executor.py``) and the
worker's claimed tasks (``claimed_tasks.py``) both execute tasks through it, so the two
paths cannot drift; what differs is only the writer, the approver and who marks the task
row ``running``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC
from pathlib import Path
from typing import Any

from agentctl.compiler.plan import PlanTask
from agentctl.digest import canonical_json, canonical_json_reusing, digest_bytes, string_json
from agentctl.engine.actions.context import TaskEnv, TaskResult
from agentctl.engine.core.records import Attempt, RunLog, RunRow
from agentctl.engine.effects import tracing
from agentctl.engine.effects.gate import EffectGate
from agentctl.engine.run import deadlines, retrying
from agentctl.engine.run.artifacts import RunArtifacts
from agentctl.engine.run.frontier import StoredPlan, TaskOutputs, TaskRows
from agentctl.engine.run.outcome import ExecutionOptions, TaskOutcome
from agentctl.engine.run.prediction import Prediction
from agentctl.engine.run.tasks import (
    check_contract,
    loop_exit_guard,
    run_body,
    when_condition,
    when_skip_output,
)
from agentctl.errors import AgentctlError, PersistenceError
from agentctl.ids import Clock
from agentctl.observability import telemetry
from agentctl.policy.paths import WorkspacePolicy
from agentctl.signals import (
    ApprovalPending,
    EffectBlocked,
    FreshAttempt,
    TaskFailure,
    as_task_failure,
)
from agentctl.spec.models_runtime import Runtime
from agentctl.spec.template_exceptions import TemplateError
from agentctl.spec.templates import OPEN, Copies, TemplateContext, render

__all__ = ["WAITING", "TaskAttempts", "default_timeout_seconds", "part_text"]

#: Task states of a task that already started: its decision is not taken again.
WAITING = frozenset({"running", "waiting_for_approval", "waiting_for_effect"})


def default_timeout_seconds(spec: Mapping[str, Any]) -> int:
    """``spec.runtime.defaultTimeoutSeconds``, else the spec model's default (its home)."""
    runtime = spec.get("runtime") or {}
    return int(
        runtime.get("defaultTimeoutSeconds") or Runtime.default_of("default_timeout_seconds")
    )


def _compensation_approval(run: RunRow, spec: Mapping[str, Any]) -> str | None:
    """A compensation run's approval: keep the policy, remove the gate, or always ask."""
    if run.mode != "compensate":
        return None
    setting = str((spec.get("compensation") or {}).get("approval") or "policy")
    return {"never": "never", "always": "always"}.get(setting)


def _plain(value: Any) -> bool:
    """A number, boolean, null or string without a template: rendered as itself."""
    kind = type(value)
    return (
        kind is int
        or kind is float
        or kind is bool
        or value is None
        or (kind is str and OPEN not in value)
    )


def part_text(whole: Any, text: str, keys: tuple[str, ...], part: Any) -> str | None:
    """The canonical JSON of ``part``, found at ``keys`` in ``whole`` whose canonical JSON is
    ``text``, when every object on the way has that one member (the text of ``{"k": v}``
    is ``{"k":``, the text of ``v``, ``}``); None otherwise, or when what is found there is
    not ``part`` itself."""
    for key in keys:
        if type(whole) is not dict or len(whole) != 1 or key not in whole:
            return None
        text = text[len(string_json(key)) + 2 : -1]
        whole = whole[key]
    return text if whole is part else None


#: The workspace policy of each run snapshot this process executes tasks of, by the
#: snapshot's run row: resolved once per snapshot, as the executor resolves its run's once,
#: not for every task a worker claims of the run (each resolution is system calls on every
#: root). A new snapshot (another owner, a resumed run) resolves its own. Emptied when it
#: holds :data:`_POLICIES_LIMIT`.
_POLICIES: dict[int, tuple[RunRow, Path, WorkspacePolicy]] = {}
_POLICIES_LIMIT = 64


def _workspace_policy(run: RunRow, base_dir: Path, policy: Mapping[str, Any]) -> WorkspacePolicy:
    found = _POLICIES.get(id(run))
    if found is not None and found[0] is run and found[1] == base_dir:
        return found[2]
    made = WorkspacePolicy(
        base_dir,
        str(policy.get("workspaceRoot") or "."),
        list(policy.get("writableRoots") or []),
    )
    if len(_POLICIES) >= _POLICIES_LIMIT:
        _POLICIES.clear()
    _POLICIES[id(run)] = (run, base_dir, made)
    return made


class TaskAttempts:
    """Executes tasks of one run through one fenced writer (see the module's doc)."""

    def __init__(
        self,
        *,
        run: RunRow,
        plan: StoredPlan,
        rows: TaskRows,
        outputs: TaskOutputs,
        writer: Any,
        log: RunLog,
        trace: tracing.RunTrace,
        clock: Clock,
        options: ExecutionOptions,
        artifacts: RunArtifacts,
        session: Callable[[], Any],
        approver: Any = None,
        on_task_running: Callable[[Any, Attempt], None] = lambda _conn, _attempt: None,
        prediction: Prediction | None = None,
    ) -> None:
        self.run = run
        self.run_id = run.id
        self.plan = plan
        self.rows = rows
        self.outputs = outputs
        self.writer = writer
        self.log = log
        self.trace = trace
        self.clock = clock
        self.options = options
        self.prediction = prediction
        self._session = session  # where a retry's wait is recorded
        self.spec: Mapping[str, Any] = run.workflow.get("spec") or {}
        self.policy = dict(self.spec.get("policy") or {})
        self.base_dir = Path(options.workspace or run.workspace or ".")
        # The folder of the workflow file the run was made from (a function step's modules).
        self.workflow_dir = Path(run.workflow_file).parent if run.workflow_file else None
        self.workspace = _workspace_policy(run, self.base_dir, self.policy)
        artifacts.writer = writer
        artifacts.claimed = log.lane is not None  # a worker's claimed task, as the gate's
        self.artifacts = artifacts
        self.gate = EffectGate(
            writer,
            log,
            clock,
            policy=self.policy,
            faults=options.faults,
            approver=approver,
            on_task_running=on_task_running,
            approval_mode=_compensation_approval(run, self.spec),
        )
        self.default_timeout = default_timeout_seconds(self.spec)
        # Per run, not per attempt: what every task's template context and env share.
        self._named_artifacts: Mapping[str, Mapping[str, Any]] | None = None
        self._run_created_at = run.created_at.replace(tzinfo=UTC)
        self._compensation = run.mode == "compensate"

    # -- the template context and the events -------------------------------------------

    def context(self, task_vars: Mapping[str, Any], memory: Mapping[str, Any]) -> TemplateContext:
        return TemplateContext(
            inputs=self.run.inputs,
            vars=task_vars,
            memory=memory,
            tasks=self.outputs,
            artifacts=self._artifact_values(),
        )

    def _artifact_values(self) -> Mapping[str, Mapping[str, Any]]:
        # Read once: the mapping returned is the run's own, kept current as artifacts are
        # recorded (engine/run/artifacts.py), so every later context shares it.
        named = self._named_artifacts
        if named is None:
            named = self._named_artifacts = self.artifacts.template_values(
                {tid: self.plan.tasks[tid] for tid in self.plan.artifact_tasks}
            )
        return named

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        if self.options.events is not None:
            ids = self.trace.event_fields(data.get("taskId"))
            self.options.events(kind, {"runId": self.run_id, **ids, **data})

    # -- before a task runs ------------------------------------------------------------

    def pre_check(
        self, task: PlanTask, memory: Mapping[str, Any]
    ) -> TaskOutcome | tuple[dict[str, Any], dict[str, Any] | None]:
        """Skip rules of docs/running.md, then the rendered vars the task will run with and the
        condition decision (``when`` or loop guard) that let it run, if it has one.

        A task that already started (waiting for approval or an effect) is not decided
        again: its decision was recorded when it first ran."""
        row = self.rows[task.id]
        if row.status in WAITING:
            return self.render_vars(task, memory), None
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
            task_vars = self.render_vars(task, memory)
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
                condition = when_condition(task, self.context(task_vars, memory))
                if not condition["result"]:
                    return TaskOutcome(
                        "skipped",
                        row.attempt,
                        has_output=True,
                        output=when_skip_output(condition),
                        condition=condition,
                    )
            elif task.uses.kind == "loop_aggregate":
                condition = loop_exit_guard(task, self.rows, self.context(task_vars, memory))
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

    def render_vars(self, task: PlanTask, memory: Mapping[str, Any]) -> dict[str, Any]:
        if not task.vars:
            return {}  # nothing to render (most tasks): no template context is built
        if all(_plain(value) for value in task.vars.values()):
            return dict(task.vars)  # what rendering returns (a foreach item's bindings)
        rendered = render(task.vars, self.context({}, memory))  # a new object
        return rendered if type(rendered) is dict else {}

    # -- the attempts ------------------------------------------------------------------

    async def run_task(
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
        attempt_no = row.attempt if row.status in WAITING and row.attempt else row.attempt + 1
        attempts_used = 0
        while True:
            attempts_used += 1
            attempt = Attempt(self.run_id, task.id, attempt_no)
            if self.options.events is not None:
                self.emit("task.started", {"taskId": task.id, "attempt": attempt_no})
            try:
                context = self.context(task_vars, memory)
                # A new object whatever the plan's input is (render copies every object).
                copies: Copies = []
                rendered = render(task.input, context, copies)
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
                    compensation=self._compensation,
                    run_created_at=self._run_created_at,
                    condition=condition,
                    workflow_dir=self.workflow_dir,
                )
                body = deadlines.bounded(
                    run_body(env, self.rows, context, self.options.pool),
                    seconds=task.timeout_seconds,
                    store=self.writer.store,
                    attempt=attempt,
                )
                # As a span when telemetry is on; otherwise the body alone (one coroutine
                # fewer for every attempt).
                result: TaskResult = await (
                    tracing.traced_attempt(self.trace, task, attempt, body)
                    if telemetry.active().enabled
                    else body
                )
                if not self.options.check:
                    check_contract(task, result.output)
                # Nothing written and no declared artifact (most steps): nothing to ingest.
                ingested = (
                    []
                    if self.options.check or not (env.written or task.artifacts)
                    else await self.artifacts.ingest(task, attempt_no, env.written, self.workspace)
                )
                # Repair compares the input's digest: a task is reusable only with the same
                # inputs. The output often holds the input, or its children's outputs: their
                # texts are taken rather than encoded again (both made here, at one moment).
                input_json = self._input_json(rendered, copies)
                return TaskOutcome(
                    "succeeded",
                    attempt_no,
                    output=result.output,
                    has_output=True,
                    memory_delta=result.memory_delta,
                    input_digest=digest_bytes(input_json.encode("utf-8")),
                    effect_ids=list(attempt.effect_ids),
                    artifacts=ingested,
                    output_json=(
                        result.output_json
                        if result.output_json is not None
                        else self._output_json(task, result.output, rendered, input_json)
                    ),
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

    def _input_json(self, rendered: Any, copies: Copies) -> str:
        """The rendered input's canonical JSON, taking the text of each part that is a copy
        of a recorded output (or of its only member, and so on down: a join's
        ``tasks.fanout.output.items``) rather than encoding it again."""
        known = []
        for copied, original, expression in copies:
            text = self._recorded_text(original, expression.path)
            if text is not None:
                known.append((copied, text))
        return canonical_json_reusing(rendered, known) if known else canonical_json(rendered)

    def _recorded_text(self, value: Any, path: tuple[str, ...]) -> str | None:
        """The canonical JSON of ``value``, read at ``path`` (``tasks.ID.output…``), when
        the task's recorded output text is held (:func:`part_text`)."""
        if len(path) < 3 or path[0] != "tasks" or path[2] != "output":
            return None
        row = self.rows.get(path[1])
        if row is None or not row.has_output or row.output_json is None:
            return None
        return part_text(row.output, row.output_json, path[3:], value)

    def _output_json(
        self, task: PlanTask, output: Any, rendered: Any, input_json: str
    ) -> str | None:
        """The output's canonical JSON, reusing the texts of the parts already encoded: the
        rendered input, and an aggregate's children's outputs as recorded. None when the
        output is not JSON (the transition's own encoding then says why)."""
        known = [(rendered, input_json)]
        for child in task.uses.children:
            row = self.rows.get(child)
            if row is not None and row.has_output and row.output_json is not None:
                known.append((row.output, row.output_json))
        try:
            return canonical_json_reusing(output, known)
        except (TypeError, ValueError, RecursionError):
            return None  # the transition encodes it again and fails as it always has

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
        with self._session().write() as conn:
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
