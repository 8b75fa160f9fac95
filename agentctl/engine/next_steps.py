"""Which commands to suggest after a run stops, chosen from what the store says.

A paused run needs its approvals approved, its questions answered, its uncertain effects
reconciled and then a resume. A failed or cancelled run cannot be resumed (it is finished):
it is retried, repaired after the workflow is changed, or compensated when it declared
inverse actions and has confirmed mutations to undo. Each suggestion names the command
exactly (spelled by :mod:`agentctl.hints`) and says what it will do, and a suggestion is
made only when the command would do that for this run.
"""

from __future__ import annotations

from pathlib import Path

from pydantic.dataclasses import dataclass as record

from agentctl import hints
from agentctl.engine.core.records import TERMINAL_RUN_STATES, RunRow, load_run
from agentctl.errors import AgentctlError
from agentctl.store import tasks_repo
from agentctl.store.engine import Store
from agentctl.typed_records import CAMEL, CamelRecord

__all__ = ["NextStep", "after_conclusion", "for_run", "render"]


@record(frozen=True, slots=True, config=CAMEL)
class NextStep(CamelRecord):
    command: str
    why: str


def render(steps: list[NextStep]) -> str:
    """The steps as a hint, one per line: ```cmd``: why``."""
    return "\n".join(f"{hints.quoted(s.command)}: {s.why}" for s in steps)


def for_run(store: Store, run_id: str) -> list[NextStep]:
    """The next steps for a run in the state the store holds now."""
    with store.read() as conn:
        run = load_run(conn, run_id)
    if run.status in TERMINAL_RUN_STATES:
        return _finished(store, run)
    return _parked(store, run)


def after_conclusion(store: Store, run_id: str) -> list[NextStep]:
    """After an effect of ``run_id`` was reconciled: resume a parked run, or recover a
    finished one (resuming a finished run does nothing)."""
    return for_run(store, run_id)


def _parked(store: Store, run: RunRow) -> list[NextStep]:
    from agentctl.engine.effects.approvals import list_approvals
    from agentctl.engine.effects.unsettled import needs_reconciliation

    steps: list[NextStep] = []
    with store.read() as conn:
        pending = list_approvals(conn, run.id, status="pending")
        for approval in pending:
            if approval.kind == "question":
                steps.append(
                    NextStep(
                        hints.answer(approval.id), f"answer task {approval.task_id}'s question"
                    )
                )
            else:
                steps.append(
                    NextStep(
                        hints.approve(approval.id),
                        f"allow task {approval.task_id}'s effect (or `approvals reject`)",
                    )
                )
    for effect in needs_reconciliation(store, run.id):
        steps.append(
            NextStep(
                hints.reconcile(effect["effectId"]),
                f"say whether {effect['operation']} took effect; check the outside world first",
            )
        )
    steps.append(NextStep(hints.resume(run.id), "continue the run from its durable state"))
    return steps


def _finished(store: Store, run: RunRow) -> list[NextStep]:
    from agentctl.engine.effects.unsettled import needs_reconciliation

    if run.status == "succeeded":
        return []
    steps = [NextStep(hints.inspect(run.id), "see which task stopped it and why")]
    for effect in needs_reconciliation(store, run.id):
        steps.append(
            NextStep(
                hints.reconcile(effect["effectId"]),
                f"say whether {effect['operation']} took effect before retrying",
            )
        )
    source = run.workflow_file
    with store.read() as conn:
        counts = tasks_repo.state_counts(conn, run.id)
    rerunnable = counts.get("failed", 0) + counts.get("cancelled", 0) + counts.get("pending", 0)
    if run.mode != "compensate" and source and Path(source).is_file() and rerunnable:
        steps.append(
            NextStep(
                hints.retry_failed(source, run.id, run.workspace),
                f"run the {run.status} tasks again in a new run, reusing what succeeded",
            )
        )
    if run.mode != "compensate" and source and Path(source).is_file():
        steps.append(
            NextStep(
                hints.repair(source, run.id, run.workspace),
                "after changing the workflow, run what changed, reusing what still fits",
            )
        )
    if run.mode != "compensate" and _can_compensate(store, run.id):
        steps.append(NextStep(hints.compensate(run.id), "undo its confirmed mutations"))
    return steps


def _can_compensate(store: Store, run_id: str) -> bool:
    from agentctl.engine.recovery.compensation import plan_compensation

    try:
        plan = plan_compensation(store, run_id)
    except AgentctlError:
        return False
    return bool(plan.runnable) and not plan.blocked
