"""Recovery planning: replay, retry, repair and fork (docs/durable-execution.md).

Planners are effect-free: they read stored rows and a compiled plan and decide, per task,
``reuse`` (copy the source's result into the new run), ``execute`` (run it with a fresh
attempt) or ``blocked`` (an uncertain effect must be reconciled first). ``--plan`` prints
that decision and creates nothing. Creating the derived run copies every reused result,
its output digest, state delta and provenance into the new run's own rows, so deleting the
source run afterwards breaks nothing. The new run's working memory starts from the target
workflow's initial memory and applies only reused deltas, in plan order — never the
source's final memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field
from pydantic.dataclasses import dataclass as record

from agentctl import hints
from agentctl.compiler.identity import resolved_definitions, task_fingerprint
from agentctl.compiler.plan import Plan
from agentctl.digest import canonical_json, digest_json
from agentctl.engine.core.records import TERMINAL_RUN_STATES, RunLog, RunRow, load_run
from agentctl.engine.effects import journal
from agentctl.engine.run.creation import PreparedRun, create_run
from agentctl.engine.run.tasks import check_contract
from agentctl.errors import BlockedError, UsageError
from agentctl.ids import Clock, IdGenerator
from agentctl.signals import TaskFailure
from agentctl.spec.expressions import TemplateContext
from agentctl.spec.template_exceptions import TemplateError
from agentctl.spec.templates import render
from agentctl.store import tasks_repo
from agentctl.store.copying import copy_task_record
from agentctl.store.engine import Store
from agentctl.typed_records import CAMEL, CamelRecord

__all__ = [
    "RecoveryPlan",
    "TaskDecision",
    "create_derived_run",
    "plan_fork",
    "plan_repair",
    "plan_retry",
    "replay_run",
]


@record(frozen=True, config=CAMEL)
class TaskDecision(CamelRecord):
    task_id: str
    action: str  # reuse | execute | blocked
    reason: str
    # What unblocks a blocked decision (the command-line hint when the plan is refused);
    # not part of the plan's JSON form.
    hint: str | None = Field(default=None, exclude=True)


@dataclass
class RecoveryPlan:
    mode: str
    source: RunRow
    prepared: PreparedRun
    decisions: list[TaskDecision]
    reused_rows: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def blocked(self) -> list[TaskDecision]:
        return [d for d in self.decisions if d.action == "blocked"]

    def to_json(self) -> dict[str, Any]:
        # A view over the source run's row and the prepared run (not records) with the
        # typed decisions, as `--plan` prints it.
        counts = {"reuse": 0, "execute": 0, "blocked": 0}
        for decision in self.decisions:
            counts[decision.action] += 1
        return {
            "mode": self.mode,
            "sourceRunId": self.source.id,
            "workflow": self.prepared.plan.workflow_name,
            "workflowDigest": self.prepared.plan.workflow_digest,
            "sourceWorkflowDigest": self.source.workflow_digest,
            "counts": counts,
            "tasks": [d.to_json() for d in self.decisions],
        }


def _source(store: Store, run_id: str) -> tuple[RunRow, dict[str, dict[str, Any]]]:
    with store.read() as conn:
        run = load_run(conn, run_id, whole=True)
        rows = {row["task_id"]: row for row in tasks_repo.task_records(conn, run_id)}
    if run.status not in TERMINAL_RUN_STATES:
        raise BlockedError(
            f"run {run_id} is {run.status}; recovery operations start from a finished run",
            code="run.not_terminal",
            hint=f"resume it ({hints.quoted(hints.resume(run_id))}) or cancel it first",
            run_id=run_id,
        )
    return run, rows


def _unsettled_effects(store: Store, run_id: str, task_id: str, attempt: int) -> list[str]:
    """Effects of the task's last attempt whose outcome nobody knows yet."""
    with store.read() as conn:
        found = []
        for effect in journal.list_effects(conn, run_id, task_id=task_id):
            if effect.attempt != attempt or effect.status not in ("started", "uncertain"):
                continue
            if journal.latest_reconciliation(conn, effect.id) is None:
                found.append(effect.id)
    return found


def _reusable_status(row: Mapping[str, Any] | None) -> str | None:
    """Why a source row cannot be reused, or None when its result can be."""
    if row is None:
        return "the task is new in this workflow"
    status = row["status"]
    if status == "succeeded":
        return None
    if status == "skipped" and row["output_json"] is not None:
        return None  # a `when` or route skip record is a result like any other
    return f"it was {status} in the source run"


def _descendants(plan: Plan, roots: set[str]) -> set[str]:
    out = set(roots)
    for task_id in plan.order:
        if any(need in out for need in plan.tasks[task_id].needs):
            out.add(task_id)
    return out


def _check_from(plan: Plan, from_tasks: Sequence[str]) -> dict[str, str]:
    unknown = [t for t in from_tasks if t not in plan.tasks]
    if unknown:
        raise UsageError(
            f"--from names tasks the workflow does not have: {', '.join(unknown)}",
            hint="use task ids as `agentctl plan FILE` lists them (expanded ids included)",
        )
    return dict.fromkeys(from_tasks, "selected with --from")


def _decide(
    store: Store,
    mode: str,
    source: RunRow,
    rows: dict[str, dict[str, Any]],
    prepared: PreparedRun,
    forced: dict[str, str],
    restart_successful: bool,
    compatible: Any,
) -> RecoveryPlan:
    plan = prepared.plan
    decisions: list[TaskDecision] = []
    executed: set[str] = set()
    reused: dict[str, dict[str, Any]] = {}
    for task_id in plan.order:
        task = plan.tasks[task_id]
        row = rows.get(task_id)
        if task_id in forced:
            reason = forced[task_id]
        elif any(need in executed for need in task.needs):
            upstream = next(need for need in task.needs if need in executed)
            reason = f"depends on {upstream}, which runs again"
        elif restart_successful:
            reason = "--restart-successful"
        else:
            reason = _reusable_status(row) or compatible(task_id, row, reused)
        if reason is None and row is not None:
            decisions.append(TaskDecision(task_id, "reuse", f"{row['status']} in {source.id}"))
            reused[task_id] = row
            continue
        executed.add(task_id)
        if row is not None and row["status"] in (
            "failed",
            "cancelled",
            "running",
            "waiting_for_effect",
            "waiting_for_approval",
        ):
            unsettled = _unsettled_effects(store, source.id, task_id, int(row["attempt"]))
            if unsettled:
                decisions.append(
                    TaskDecision(
                        task_id,
                        "blocked",
                        f"effect {unsettled[0]} is uncertain; reconcile it before running the "
                        "task again",
                        hint="reconcile the effect ("
                        + hints.quoted(hints.reconcile(unsettled[0]))
                        + "), then plan again",
                    )
                )
                continue
        decisions.append(TaskDecision(task_id, "execute", str(reason)))
    _block_missing_artifacts(store, decisions, reused)
    return RecoveryPlan(mode, source, prepared, decisions, reused)


def _block_missing_artifacts(
    store: Store, decisions: list[TaskDecision], reused: dict[str, dict[str, Any]]
) -> None:
    """A reused result whose artifact bytes are missing or corrupt cannot be reused, and
    its run must not be created: block the plan (exit 3) before anything is written."""
    manifests = {
        t: row["artifact_manifest_json"]
        for t, row in reused.items()
        if row.get("artifact_manifest_json")
    }
    if not manifests:
        return
    from agentctl.artifacts import ArtifactRef, ArtifactStore
    from agentctl.ids import SystemClock

    artifacts = ArtifactStore.beside(store, SystemClock())
    with store.read() as conn:
        for index, decision in enumerate(decisions):
            if decision.task_id not in manifests:
                continue
            refs = [ArtifactRef.from_json(item) for item in json.loads(manifests[decision.task_id])]
            problems = artifacts.reuse_check(conn, refs)
            if problems:
                problem = problems[0]
                decisions[index] = TaskDecision(
                    decision.task_id,
                    "blocked",
                    f"{problem.message}, so the task's result cannot be reused",
                    hint=f"restore the blob at {problem.path} from a backup, or run the task "
                    f"again with `--from {decision.task_id}`",
                )
                reused.pop(decision.task_id, None)


def plan_retry(
    store: Store,
    source_run_id: str,
    prepared: PreparedRun,
    *,
    failed: bool,
    from_tasks: Sequence[str],
    restart_successful: bool = False,
) -> RecoveryPlan:
    """Retry the identical workflow: reuse successful boundaries, re-run the roots."""
    if not failed and not from_tasks:
        raise UsageError(
            "retry needs --failed or --from TASK",
            hint="--failed re-runs what failed; --from re-runs chosen tasks",
        )
    source, rows = _source(store, source_run_id)
    if prepared.plan.workflow_digest != source.workflow_digest:
        raise BlockedError(
            f"{prepared.workflow_file} is not the workflow run {source_run_id} ran (its "
            f"digest changed: {source.workflow_digest[:19]} -> "
            f"{prepared.plan.workflow_digest[:19]})",
            code="retry.workflow_changed",
            hint="use "
            + hints.quoted(
                hints.repair(prepared.workflow_file, source_run_id, str(prepared.workspace))
            )
            + " to reuse what is still compatible with the changed workflow",
            run_id=source_run_id,
        )
    if not failed and not from_tasks:
        raise UsageError(
            "retry needs --failed or --from TASK",
            hint="--failed re-runs what failed; --from re-runs chosen tasks",
        )
    forced = _check_from(prepared.plan, from_tasks)
    if failed:
        for t, row in rows.items():
            if row["status"] in ("failed", "cancelled") and t in prepared.plan.tasks:
                forced.setdefault(t, f"{row['status']} in {source.id} (--failed)")
    return _decide(
        store,
        "retry",
        source,
        rows,
        _with_source_inputs(prepared, source),
        forced,
        restart_successful,
        lambda *_: None,
    )


def plan_repair(
    store: Store,
    source_run_id: str,
    prepared: PreparedRun,
    *,
    from_tasks: Sequence[str],
    restart_successful: bool = False,
) -> RecoveryPlan:
    """Repair against a changed workflow: reuse only what is provably compatible."""
    source, rows = _source(store, source_run_id)
    forced = _check_from(prepared.plan, from_tasks)
    target = _with_source_inputs(prepared, source)
    spec = target.workflow.get("spec") or {}
    memory: dict[str, Any] = dict((spec.get("memory") or {}).get("working") or {})
    outputs: dict[str, Any] = {}

    source_plan = Plan.from_json(source.plan)
    source_resolved = resolved_definitions(source.workflow.get("spec") or {})
    target_resolved = resolved_definitions(spec)

    def compatible(task_id: str, row: dict[str, Any], reused: dict[str, Any]) -> str | None:
        task = target.plan.tasks[task_id]
        before = source_plan.tasks.get(task_id)
        # Both sides under this release's rule (docs/durable-execution.md, "What changes a
        # fingerprint"): never the fingerprint an older release stored.
        if before is None or task_fingerprint(before, source_resolved) != task_fingerprint(
            task, target_resolved
        ):
            return "its definition changed"
        if row["output_contract_fingerprint"] != task.output_contract_fingerprint:
            return "its output contract changed"
        output = json.loads(row["output_json"])
        if row["status"] == "succeeded":
            try:
                check_contract(task, output)
            except TaskFailure as exc:
                return f"its recorded output no longer satisfies the contract ({exc})"
            if row["input_digest"] is not None:
                context = TemplateContext(
                    inputs=target.inputs, vars={}, memory=memory, tasks=outputs
                )
                try:
                    task_vars = render(dict(task.vars), context)
                    rendered = render(
                        dict(task.input),
                        TemplateContext(
                            inputs=target.inputs, vars=task_vars, memory=memory, tasks=outputs
                        ),
                    )
                except TemplateError as exc:
                    return f"its input cannot be resolved from reused results ({exc})"
                if digest_json(rendered) != row["input_digest"]:
                    return "its resolved input changed"
        delta = json.loads(row["state_delta_json"]) if row["state_delta_json"] else {}
        if delta and task.memory_writes and not set(delta) <= set(task.memory_writes):
            return "its memory writes are no longer declared"
        unsettled = _unsettled_effects(store, source.id, task_id, int(row["attempt"]))
        if unsettled:
            return f"effect {unsettled[0]} is uncertain"
        outputs[task_id] = output
        memory.update(delta)
        return None

    return _decide(store, "repair", source, rows, target, forced, restart_successful, compatible)


def plan_fork(store: Store, source_run_id: str) -> RecoveryPlan:
    """A new run of the stored workflow that permits fresh effects on purpose."""
    source, rows = _source(store, source_run_id)
    prepared = _stored_prepared(source)
    decisions = [
        TaskDecision(t, "execute", "fork runs every task afresh") for t in prepared.plan.order
    ]
    return RecoveryPlan("fork", source, prepared, decisions)


def _with_source_inputs(prepared: PreparedRun, source: RunRow) -> PreparedRun:
    """Retry and repair keep the source run's inputs (what the work was done for)."""
    return PreparedRun(
        plan=prepared.plan,
        workflow=prepared.workflow,
        workflow_file=prepared.workflow_file,
        inputs=dict(source.inputs),
        workspace=prepared.workspace,
        load=prepared.load,
    )


def _stored_prepared(source: RunRow) -> PreparedRun:
    from pathlib import Path

    from agentctl.spec import LoadResult

    return PreparedRun(
        plan=Plan.from_json(source.plan),
        workflow=source.workflow,
        workflow_file=source.workflow_file or "",
        inputs=dict(source.inputs),
        workspace=Path(source.workspace or "."),
        load=LoadResult(
            path=source.workflow_file or "", document=None, diagnostics=[], source=None, raw=None
        ),
    )


def create_derived_run(
    store: Store,
    recovery: RecoveryPlan,
    *,
    clock: Clock,
    ids: IdGenerator,
    reason: str | None = None,
    actor: str | None = None,
) -> str:
    """Create the new run and copy every reused result into its own rows (``actor``: who
    asked for it, recorded in ``run.created``)."""
    if recovery.blocked:
        first = recovery.blocked[0]
        raise BlockedError(
            f"{recovery.mode} is blocked: task {first.task_id}: {first.reason}",
            code=f"{recovery.mode}.blocked",
            hint=first.hint
            or f"reconcile the effect ({hints.quoted(hints.reconcile_list(recovery.source.id))}), "
            "then plan again",
            run_id=recovery.source.id,
        )
    run_id = create_run(
        store,
        recovery.prepared,
        clock=clock,
        ids=ids,
        mode=recovery.mode,
        source_run_id=recovery.source.id,
        relation=recovery.mode,
        reason=reason,
        actor=actor,
    )
    _copy_reused(store, run_id, recovery, clock)
    return run_id


def _copy_reused(store: Store, run_id: str, recovery: RecoveryPlan, clock: Clock) -> None:
    now = clock.now()
    spec = recovery.prepared.workflow.get("spec") or {}
    memory: dict[str, Any] = dict((spec.get("memory") or {}).get("working") or {})
    with store.write() as conn:
        log = RunLog.open(conn, run_id)
        for task_id in recovery.prepared.plan.order:
            row = recovery.reused_rows.get(task_id)
            if row is None:
                continue
            delta = copy_task_record(
                conn,
                source_run_id=recovery.source.id,
                target_run_id=run_id,
                task_id=task_id,
                disposition="reused",
                now=now,
            )
            memory.update(delta)
            log.checkpoint(conn, f"task:{task_id}:reused", delta, memory, now=now)
            log.event(
                conn,
                "task.reused",
                {"sourceRunId": recovery.source.id, "outputDigest": row["output_digest"]},
                now=now,
                task_id=task_id,
            )


def replay_run(store: Store, source_run_id: str, *, clock: Clock, ids: IdGenerator) -> str:
    """Rebuild a finished run from its records; no executor of any kind is called."""
    source, rows = _source(store, source_run_id)
    prepared = _stored_prepared(source)
    run_id = create_run(
        store,
        prepared,
        clock=clock,
        ids=ids,
        mode="replay",
        source_run_id=source.id,
        relation="replay",
    )
    now = clock.now()
    spec = source.workflow.get("spec") or {}
    memory: dict[str, Any] = dict((spec.get("memory") or {}).get("working") or {})
    with store.write() as conn:
        log = RunLog.open(conn, run_id)
        for task_id in prepared.plan.order:
            row = rows.get(task_id)
            if row is None or row["status"] == "pending":
                continue
            delta = copy_task_record(
                conn,
                source_run_id=source.id,
                target_run_id=run_id,
                task_id=task_id,
                disposition="recorded",
                now=now,
                keep_error=True,
            )
            memory.update(delta)
            log.checkpoint(conn, f"task:{task_id}:replayed", delta, memory, now=now)
            log.event(conn, "task.replayed", {"state": row["status"]}, now=now, task_id=task_id)
        log.set_run(
            conn,
            status=source.status,
            updated_at=now,
            output_json=None if source.output is None else canonical_json(source.output),
            error_json=None if source.error is None else canonical_json(source.error),
        )
        log.event(conn, f"run.{source.status}", {"replayOf": source.id}, now=now)
    return run_id
