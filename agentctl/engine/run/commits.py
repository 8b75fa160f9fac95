"""The executor's writes: a batch's task transitions, and how a run finishes or parks.

:class:`RunCommits` is a part of :class:`~agentctl.engine.run.executor.RunExecutor` (a mixin:
the executor's state is its own). Each batch commits in one transaction, in plan order; a
run that finishes, parks for a person or is blocked by an uncertain effect releases its
owner lease in the same commit that records it, and the batch after which nothing is left
to run commits with the run's end (docs/durable-execution.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentctl.compiler.plan import PlanTask
from agentctl.digest import canonical_json, digest_json, sha256_hex
from agentctl.engine.core.records import (
    TERMINAL_RUN_STATES,
    TERMINAL_TASK_STATES,
    RunLog,
    RunRow,
    TransitionWrites,
)
from agentctl.engine.effects import budget
from agentctl.engine.effects.journal import mark_compensated
from agentctl.engine.effects.tracing import RunTrace
from agentctl.engine.run.artifacts import RunArtifacts
from agentctl.engine.run.frontier import StoredPlan, TaskOutputs, TaskRows
from agentctl.engine.run.outcome import ExecutionOptions, RunOutcome, TaskOutcome
from agentctl.engine.run.prediction import Prediction
from agentctl.ids import Clock
from agentctl.observability import audit_lanes
from agentctl.signals import EffectBlocked
from agentctl.spec.expressions import TemplateContext
from agentctl.spec.template_exceptions import TemplateError
from agentctl.spec.templates import render
from agentctl.store import tasks_repo
from agentctl.store.dialect import sql_dialect
from agentctl.store.run_results import EVERY_TASK
from agentctl.store.timestamps import to_db
from agentctl.store.transitions import close_live_parts

if TYPE_CHECKING:
    from agentctl.engine.run.attempts import TaskAttempts

__all__ = ["RunCommits"]


class RunCommits:
    """Task transitions, run completion and parking, for :class:`RunExecutor`."""

    run_id: str
    clock: Clock
    options: ExecutionOptions
    run: RunRow
    plan: StoredPlan
    spec: Mapping[str, Any]
    rows: TaskRows
    memory: dict[str, Any]
    outputs: TaskOutputs
    prediction: Prediction | None
    artifacts: RunArtifacts
    log: RunLog
    trace: RunTrace
    attempts: TaskAttempts
    _session: Any
    _released: bool
    _with_batch: Callable[[Any], None] | None

    def commit_with_batch(self, write: Callable[[Any], None]) -> None:
        """Run ``write(conn)`` first in the transaction that commits the batch being
        executed, whichever commit that is (the run's last batch commits with its end).

        The batch's tasks ran under claims (engine/run/task_claims.py): removing them,
        posting their pending usage and adopting their audit lanes commit with the tasks'
        transitions, so a crash leaves both or neither. A separate earlier commit cost the
        owner a commit (a WAL flush) per batch while every worker slot waited, and a crash
        between the two lost the claims' outcomes, so the next owner ran the tasks again."""
        self._with_batch = write

    def _context(self, task_vars: Mapping[str, Any], memory: Mapping[str, Any]) -> TemplateContext:
        return self.attempts.context(task_vars, memory)

    def _commit_batch(self, items: list[tuple[PlanTask, TaskOutcome]]) -> None:
        """Commit a batch's task transitions in plan order, in one transaction.

        Each transition (task row, working-memory checkpoint, audit event, artifact refs) is
        written whole; tasks that ran together in one batch commit together, so a parallel
        batch costs one fsync rather than one per task, and a crash leaves either all of
        them or none.
        """
        prepared = self._prepare(items)
        self.options.faults.hit("batch.committing")
        with self._session.write() as conn:
            memory = self._write_batch(conn, items, prepared)
        self.memory = memory
        self._took(items)
        self._committed(items)

    def _commit_last_batch(self, items: list[tuple[PlanTask, TaskOutcome]]) -> RunOutcome:
        """The batch after which nothing is left to run: its transitions and the run's
        completion (state, output, lease released) in one transaction, one commit less
        per run. A crash leaves the run before that batch, or finished."""
        prepared = self._prepare(items)
        self.options.faults.hit("batch.committing")
        with self._session.write() as conn:
            # The run's output is rendered from these rows and this memory, which the
            # transaction's own reads see.
            self.memory = self._write_batch(conn, items, prepared)
            self._took(items)
            status, output, error, output_json = self._completion(conn)
            self._write_finish(conn, status, output, error, output_json)
        self._committed(items)
        self._finished(status, error)
        return RunOutcome(self.run_id, status, output, error)

    def _prepare(
        self, items: list[tuple[PlanTask, TaskOutcome]]
    ) -> tuple[TransitionWrites, dict[str, Any]] | None:
        """The batch's rows, checkpoints and event payloads, made before its transaction
        begins (none of it reads the store), and the working memory after them; None when
        a transition runs statements of its own (compensation, artifacts), which it then
        does inside the transaction.

        The transaction then holds little besides its statements, the chain-head read and
        the events' digests: its write lock (the run's lock on PostgreSQL) is held about a
        fifth less (W1: 133 to 108 µs from BEGIN done to COMMIT sent, medians)."""
        for _, outcome in items:
            if self._own_statements(outcome):
                return None
        writes = self.log.transitions(None)
        memory = dict(self.memory)
        for task, outcome in items:
            memory = self._write_transition(writes, task, outcome, memory)
        return writes, memory

    def _own_statements(self, outcome: TaskOutcome) -> bool:
        """Whether a transition writes more than its row, checkpoint and event."""
        compensated = outcome.status == "succeeded" and self.run.mode == "compensate"
        return compensated or bool(outcome.artifacts)

    def _write_batch(
        self,
        conn: Any,
        items: list[tuple[PlanTask, TaskOutcome]],
        prepared: tuple[TransitionWrites, dict[str, Any]] | None,
    ) -> dict[str, Any]:
        """The batch's transitions in plan order (as :meth:`_prepare` made them, or made
        here); returns the working memory after them."""
        settle, self._with_batch = self._with_batch, None
        if settle is not None:
            # Before the transitions: what it appends to the audit chain (the claims'
            # lanes) comes before the tasks' own events, as when it committed apart.
            settle(conn)
        if prepared is not None:
            writes, memory = prepared
            writes.conn = conn
        else:
            memory = dict(self.memory)
            writes = self.log.transitions(conn)
            for task, outcome in items:
                memory = self._write_transition(writes, task, outcome, memory)
        writes.flush()
        return memory

    def _took(self, items: list[tuple[PlanTask, TaskOutcome]]) -> None:
        """The executor's rows take the batch's outcomes."""
        for task, outcome in items:
            row = self.rows[task.id]
            row.status, row.attempt = outcome.status, outcome.attempt
            row.error = outcome.error
            if outcome.has_output:  # templates read it through self.outputs
                row.output, row.has_output = outcome.output, True
                row.output_json = outcome.output_json
                if self.prediction is not None:
                    self.prediction.observe(task.id, outcome.output)

    def _committed(self, items: list[tuple[PlanTask, TaskOutcome]]) -> None:
        faults, listening = self.options.faults, self.options.events is not None
        for task, outcome in items:
            faults.hit("task.committed")
            if not listening:  # no progress event to build
                continue
            self._emit(
                "task",
                {
                    "taskId": task.id,
                    "state": outcome.status,
                    "attempt": outcome.attempt,
                    "error": outcome.error,
                },
            )

    def _write_transition(
        self, writes: TransitionWrites, task: PlanTask, outcome: TaskOutcome, memory: dict[str, Any]
    ) -> dict[str, Any]:
        """One task transition of the batch (its statements run at the batch's flush, in
        its transaction); returns the memory after it."""
        now = self.clock.now()
        terminal = outcome.status in TERMINAL_TASK_STATES
        delta = outcome.memory_delta if outcome.status == "succeeded" else {}
        values: dict[str, Any] = {
            "status": outcome.status,
            "attempt": outcome.attempt,
            "error_json": None if outcome.error is None else canonical_json(outcome.error),
        }
        if outcome.has_output:
            output_json = outcome.output_json
            if output_json is None:
                output_json = outcome.output_json = canonical_json(outcome.output)
            values["output_json"] = output_json
            values["output_digest"] = "sha256:" + sha256_hex(output_json.encode())
            values["disposition"] = "executed" if outcome.status == "succeeded" else "recorded"
        if outcome.input_digest is not None:
            values["input_digest"] = outcome.input_digest
        if outcome.condition is not None:
            values["condition_json"] = canonical_json(outcome.condition)
        values.update(self.trace.task_values(task.id))
        if delta:
            values["state_delta_json"] = canonical_json(delta)
            values["state_delta_digest"] = digest_json(delta)
        if terminal:
            values["finished_at"] = to_db(now)  # its stored text, formatted once for the
            # row, the checkpoint and the event (to_db keeps the last ones it wrote)
        writes.set_task(task.id, values)
        if terminal:
            if delta:  # memory is never changed in place: without a delta it stays as is
                memory = {**memory, **delta}
            writes.checkpoint(f"task:{task.id}:{outcome.status}", delta, memory, now)
        payload: dict[str, Any] = {"state": outcome.status, "attempt": outcome.attempt}
        if outcome.error is not None:
            payload["error"] = outcome.error
        if outcome.has_output:
            payload["outputDigest"] = values["output_digest"]
        if delta:
            payload["memoryKeys"] = sorted(delta)
        if outcome.condition is not None:
            payload["condition"] = outcome.condition
        writes.event(f"task.{outcome.status}", payload, now=now, task_id=task.id)
        if not self._own_statements(outcome):
            return memory
        # Statements of their own that read or append to what is written so far (inside
        # the transaction: _prepare leaves such a batch to _write_batch).
        writes.flush()
        conn = writes.conn
        if outcome.status == "succeeded" and self.run.mode == "compensate":
            mark_compensated(conn, self.run, task.id, outcome.effect_ids, now)
        if outcome.artifacts:
            manifest = self.artifacts.record(
                conn,
                task,
                outcome.artifacts,
                input_digest=outcome.input_digest,
                output_digest=values.get("output_digest"),
            )
            self.log.set_task(conn, task.id, artifact_manifest_json=canonical_json(manifest))
        return memory

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        self.attempts.emit(kind, data)

    def _finish_run(
        self,
        status: str,
        *,
        output: Any = None,
        error: dict[str, Any] | None = None,
        output_json: str | None = None,
    ) -> None:
        """End this execution: the run's state, output (``output_json`` when it is already
        encoded) and error, and the owner lease released, in one commit."""
        with self._session.write() as conn:
            self._write_finish(conn, status, output, error, output_json)
        self._finished(status, error)

    def _write_finish(
        self,
        conn: Any,
        status: str,
        output: Any,
        error: dict[str, Any] | None,
        output_json: str | None,
    ) -> None:
        now = self.clock.now()
        # A run that declares no outputs has every task's output as its result (never
        # None once it ends): the task rows hold it, so the run row gets a reference, not
        # a copy (store/run_results.py assembles it for every reader).
        every_task = output is not None and not self.spec.get("outputs")
        if every_task:
            output_json = None
        elif output_json is None and output is not None:
            output_json = canonical_json(output)
        # The owner lease is released in the same commit: this execution ends here.
        self.log.set_run(
            conn,
            status=status,
            updated_at=now,
            output_json=output_json,
            output_source=EVERY_TASK if every_task else None,
            error_json=None if error is None else canonical_json(error),
            owner_id=None,
            owner_lease_expires_at=None,
        )
        if status in TERMINAL_RUN_STATES:
            close_live_parts(conn, self.run_id, now)
        if sql_dialect(conn.dialect.name).advisory_locks:
            # Workers' audit lanes this run still has (a claim a crashed owner left, one
            # of an earlier owner's batch): into the chain before the run's last event.
            # Only PostgreSQL stores have workers, so only they can hold lanes.
            audit_lanes.adopt_lanes(conn, self.run_id)
            # And their usage of resources without a limit, into the ledger.
            budget.post_pending(conn, self.run_id, now)
        self.log.event(conn, f"run.{status}", {"error": error}, now=now)

    def _finished(self, status: str, error: dict[str, Any] | None) -> None:
        self._released = True
        self.trace.finish(status, error)
        self._emit("run", {"state": status})

    def _park_waiting(self, approvals: list[str]) -> RunOutcome:
        error = {"code": "run.paused", "message": "waiting for " + ", ".join(approvals)}
        self._finish_run("paused", error=error)
        return RunOutcome(self.run_id, "paused", None, error, approvals=approvals)

    def _park_blocked(self, blocked: list[EffectBlocked]) -> RunOutcome:
        effects = [{"effectId": b.effect_id, "operation": b.operation} for b in blocked]
        error = {
            "code": "effect.uncertain",
            "message": "uncertain effects block the run: "
            + ", ".join(f"{b.effect_id} ({b.operation})" for b in blocked),
        }
        self._finish_run("paused", error=error)
        return RunOutcome(self.run_id, "paused", None, error, uncertain_effects=effects)

    def _complete(self) -> RunOutcome:
        status, output, error, output_json = self._completion(self._session)
        self._finish_run(status, output=output, error=error, output_json=output_json)
        return RunOutcome(self.run_id, status, output, error)

    def _completion(self, conn: Any) -> tuple[str, Any, dict[str, Any] | None, str | None]:
        """How the run ends once no task is left to run: state, output (and its JSON when
        known), error."""
        # Every transition is written: the stored rows are the rows (an indexed read of
        # the failed and cancelled ones, however long the run).
        ended = tasks_repo.tasks_in_states(conn, self.run_id, ("failed", "cancelled"))
        failed = [tid for tid, status in ended if status == "failed"]
        cancelled = [tid for tid, status in ended if status == "cancelled"]
        try:
            output, output_json = self._render_outputs()
        except TemplateError as exc:
            render_error = {"code": "template.error", "message": f"spec.outputs: {exc}"}
            return "failed", None, render_error, None
        if failed:
            error: dict[str, Any] = {
                "code": "run.failed",
                "message": "tasks failed: " + ", ".join(failed),
                "tasks": failed,
            }
            return "failed", output, error, output_json
        return ("cancelled" if cancelled else "succeeded"), output, None, output_json

    def _render_outputs(self) -> tuple[Any, str | None]:
        """The run's output, and its canonical JSON when that is known without encoding
        (None for a result that is every task's output: it is stored as a reference)."""
        declared = self.spec.get("outputs")
        if not declared:
            return self.outputs.every(), None  # every output, in plan order
        context = self._context({}, self.memory)
        if self.prediction is not None:
            rendered = self.prediction.render_outputs(dict(declared), lambda t: render(t, context))
            return rendered, None
        return render(dict(declared), context), None
