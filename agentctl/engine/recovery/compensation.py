"""Compensation (docs/durable-execution.md): undo a finished run's confirmed mutations.

Planning is effect-free. Eligible are the source run's effects whose class mutates (not
``pure``, ``observe`` or ``model``) and that are confirmed successful or reconciled
``applied``; ``not_applied`` and already ``compensated`` ones are skipped; a started,
uncertain or unconfirmed one blocks its task (exit 3) until reconciled. Each task that
declares ``compensate`` and has an eligible effect gets ``compensate--<task id>``, whose
input is rendered now against the source run (inputs, final working memory, every
recorded output, the task's vars). The generated run executes them one by one in reverse
compiled order with the ordinary effect protocol, policy, approvals, retries and audit;
each success appends a ``compensated`` reconciliation to the source effects it undid, in
the same transaction, so a repeated plan skips them and a failed one stays retryable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import computed_field
from pydantic.dataclasses import dataclass as record

from agentctl import hints
from agentctl.compiler import compile_workflow
from agentctl.compiler.effects import NON_MUTATING_EFFECT_CLASSES
from agentctl.compiler.plan import Plan
from agentctl.engine.core.records import TERMINAL_RUN_STATES, RunRow, load_run, replay_memory
from agentctl.engine.effects import journal
from agentctl.engine.run.creation import PreparedRun, create_run
from agentctl.errors import BlockedError, UsageError
from agentctl.ids import Clock, IdGenerator
from agentctl.spec.expressions import TemplateContext
from agentctl.spec.template_exceptions import TemplateError
from agentctl.spec.templates import render
from agentctl.spec.validate import validate_document
from agentctl.store import tasks_repo
from agentctl.store.claims import claim_compensation
from agentctl.store.engine import Store
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

__all__ = [
    "CompensationPlan",
    "CompensationStep",
    "compensate_automatically",
    "create_compensation_run",
    "plan_compensation",
]

NON_MUTATING = NON_MUTATING_EFFECT_CLASSES


@record(config=CAMEL)
class CompensationStep(CamelRecord):
    """What compensation does for one task of the source run (``compensate --plan``)."""

    task_id: str
    action: Literal["compensate", "skip", "blocked"]
    reason: str
    effects: list[str] = field(default_factory=list)
    input: Any = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def compensation_task_id(self) -> str:
        return f"compensate--{self.task_id}"

    _order = keys_in_order("taskId", "compensationTaskId")


@dataclass
class CompensationPlan:
    source: RunRow
    steps: list[CompensationStep]

    @property
    def blocked(self) -> list[CompensationStep]:
        return [s for s in self.steps if s.action == "blocked"]

    @property
    def runnable(self) -> list[CompensationStep]:
        return [s for s in self.steps if s.action == "compensate"]

    def to_json(self) -> dict[str, Any]:
        # A view over the source run's row (not a record) and the typed steps.
        steps = [step.to_json() for step in self.steps]
        return {"sourceRunId": self.source.id, "complete": not self.blocked, "steps": steps}


def _classify(conn: Any, run_id: str, task_id: str) -> tuple[list[str], str | None]:
    """Eligible effect ids of a task, or the reason it is blocked."""
    eligible: list[str] = []
    for effect in journal.list_effects(conn, run_id, task_id=task_id):
        if effect.effect_class in NON_MUTATING:
            continue
        conclusion = journal.latest_reconciliation(conn, effect.id)
        if conclusion is not None:
            if conclusion.status == "applied":
                eligible.append(effect.id)
            continue  # not_applied, or already compensated
        if effect.status == "succeeded" and effect.confirmed:
            eligible.append(effect.id)
        elif effect.status in ("started", "uncertain") or (
            effect.status == "succeeded" and not effect.confirmed
        ):
            return [], (
                f"effect {effect.id} ({effect.operation}) is {effect.status}; "
                "reconcile it before compensating"
            )
    return eligible, None


def plan_compensation(
    store: Store, source_run_id: str, *, only: list[str] | None = None
) -> CompensationPlan:
    with store.read() as conn:
        source = load_run(conn, source_run_id, whole=True)
        if source.status not in TERMINAL_RUN_STATES:
            raise BlockedError(
                f"run {source_run_id} is {source.status}; compensation is planned only for a "
                "finished run",
                code="run.not_terminal",
                hint=f"resume it ({hints.quoted(hints.resume(source_run_id))}) or cancel it first",
                run_id=source_run_id,
            )
        plan = Plan.from_json(source.plan)
        unknown = [t for t in only or [] if t not in plan.tasks]
        if unknown:
            raise UsageError(
                f"--task names tasks run {source_run_id} does not have: " + ", ".join(unknown)
            )
        spec = source.workflow.get("spec") or {}
        memory = replay_memory(conn, source_run_id, (spec.get("memory") or {}).get("working") or {})
        outputs = {
            task_id: json.loads(output_json)
            for task_id, output_json in tasks_repo.outputs(conn, source_run_id)
        }
        steps: list[CompensationStep] = []
        for task_id in reversed(plan.order):
            task = plan.tasks[task_id]
            if task.compensate is None or (only and task_id not in only):
                continue
            eligible, blocked = _classify(conn, source_run_id, task_id)
            if blocked is not None:
                steps.append(CompensationStep(task_id, "blocked", blocked))
                continue
            if not eligible:
                steps.append(
                    CompensationStep(task_id, "skip", "no confirmed mutation left to compensate")
                )
                continue
            steps.append(_render_step(task_id, task, eligible, source, memory, outputs))
    return CompensationPlan(source, steps)


def _render_step(
    task_id: str,
    task: Any,
    eligible: list[str],
    source: RunRow,
    memory: dict[str, Any],
    outputs: dict[str, Any],
) -> CompensationStep:
    base = TemplateContext(inputs=source.inputs, vars={}, memory=memory, tasks=outputs)
    try:
        task_vars = render(dict(task.vars), base)
        rendered = render(
            dict(task.compensate.input),
            TemplateContext(inputs=source.inputs, vars=task_vars, memory=memory, tasks=outputs),
        )
    except TemplateError as exc:
        return CompensationStep(
            task_id, "blocked", f"compensation_input_unavailable: {exc}", eligible
        )
    if "${{" in json.dumps(rendered):
        # The generated run renders its inputs again; a literal template marker coming from
        # a recorded output would be evaluated there, so refuse rather than guess.
        return CompensationStep(
            task_id,
            "blocked",
            "compensation_input_unavailable: the rendered input contains a literal `${{`",
            eligible,
        )
    return CompensationStep(
        task_id, "compensate", f"{len(eligible)} confirmed mutation(s) to undo", eligible, rendered
    )


def _without_nulls(value: Any) -> Any:
    """Drop null-valued keys of a section that has no free-form JSON slot (policy,
    runtime): the stored document spells out every default, the model accepts absence."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _generated_document(plan: CompensationPlan) -> dict[str, Any]:
    """The compensation workflow: the source's policy and the inverse actions only."""
    source = plan.source
    source_spec = source.workflow.get("spec") or {}
    source_plan = Plan.from_json(source.plan)
    actions: dict[str, Any] = {}
    generated = []
    for step in plan.runnable:
        compensate = source_plan.tasks[step.task_id].compensate
        assert compensate is not None
        name = compensate.uses.removeprefix("action:")
        definition = (source_spec.get("actions") or {}).get(name) or {}
        # An action's `with` is free-form JSON (nulls are data there); its other keys are not.
        actions[name] = {
            k: v
            for k, v in definition.items()
            if k == "with" or v not in (None, [], {})  # defaults spelled out by the dump
        }
        generated.append(
            {
                "id": step.compensation_task_id,
                "uses": compensate.uses,
                "with": step.input,
                "failure": "continue",
                "retry": compensate.retry.to_json(),
                "timeoutSeconds": compensate.timeout_seconds,
            }
        )
    runtime = _without_nulls(dict(source_spec.get("runtime") or {}))
    runtime["maxConcurrency"] = 1
    return {
        "apiVersion": source.workflow.get("apiVersion", "agentctl.dev/v1"),
        "kind": "Workflow",
        "metadata": {
            "name": f"{source.workflow_name}-compensation",
            "description": f"compensation of {source.id}",
        },
        "spec": {
            "inputs": {
                journal.COMPENSATION_INPUT: {
                    step.compensation_task_id: {
                        "sourceTaskId": step.task_id,
                        "effects": step.effects,
                    }
                    for step in plan.runnable
                }
            },
            "policy": _without_nulls(dict(source_spec.get("policy") or {})),
            "compensation": _without_nulls(dict(source_spec.get("compensation") or {})),
            "runtime": runtime,
            "memory": {"working": {}},
            "actions": actions,
            "tasks": generated,
        },
    }


def create_compensation_run(
    store: Store,
    plan: CompensationPlan,
    *,
    clock: Clock,
    ids: IdGenerator,
    workspace: Path | None = None,
) -> str | None:
    """Create the compensation run (None when there is nothing to compensate). It works in
    ``workspace`` (``--workspace``), else where the source run worked."""
    if plan.blocked:
        first = plan.blocked[0]
        raise BlockedError(
            f"compensation of {plan.source.id} is blocked: task {first.task_id}: {first.reason}",
            code="compensation.blocked",
            hint=f"reconcile the effect ({hints.quoted(hints.reconcile_list(plan.source.id))}), "
            "then plan again",
            run_id=plan.source.id,
        )
    if not plan.runnable:
        return None
    document = _generated_document(plan)
    with store.read() as conn:
        final_memory = replay_memory(
            conn,
            plan.source.id,
            ((plan.source.workflow.get("spec") or {}).get("memory") or {}).get("working") or {},
        )
    document["spec"]["memory"]["working"] = final_memory
    model, diagnostics = validate_document(document)
    if model is None:
        raise UsageError(
            "the generated compensation workflow is invalid: "
            + "; ".join(f"{d.path}: {d.message}" for d in diagnostics if d.is_error),
            code="compensation.invalid",
        )
    compiled = compile_workflow(model)
    if not compiled.ok or compiled.plan is None:
        raise UsageError(
            "the generated compensation workflow does not compile: "
            + "; ".join(f"{d.path}: {d.message}" for d in compiled.errors),
            code="compensation.invalid",
        )
    from agentctl.spec import LoadResult

    prepared = PreparedRun(
        plan=compiled.plan,
        workflow=model.model_dump(mode="json", by_alias=True),
        workflow_file=plan.source.workflow_file or "",
        inputs=dict(document["spec"]["inputs"]),
        workspace=workspace or Path(plan.source.workspace or "."),
        load=LoadResult(path="", document=model, diagnostics=[], source=None, raw=None),
    )
    return create_run(
        store,
        prepared,
        clock=clock,
        ids=ids,
        mode="compensate",
        source_run_id=plan.source.id,
        relation="compensate",
        guard=lambda conn: claim_compensation(
            conn, plan.source.id, [e for step in plan.runnable for e in step.effects]
        ),
    )


def compensate_automatically(store: Store, run: RunRow, *, clock: Clock) -> str | None:
    """``spec.compensation.onFailure: automatic``, decided once for the executor and the
    workers: for a run that just failed, plan and create its compensation run. Its id, or
    None when ``run`` is itself a compensation, does not ask for automatic compensation,
    or has nothing to undo. The caller runs it (or releases it to the workers)."""
    setting = ((run.workflow.get("spec") or {}).get("compensation") or {}).get("onFailure")
    if run.mode == "compensate" or setting != "automatic":
        return None
    plan = plan_compensation(store, run.id)
    return create_compensation_run(store, plan, clock=clock, ids=IdGenerator(clock))
