"""``agentctl roll`` (alias ``run``), ``resume`` and ``cancel``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.cli.output import next_lines
from agentctl.cli.progress import Progress
from agentctl.errors import (
    EXIT_BLOCKED,
    EXIT_CANCELLED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    AgentctlError,
    BlockedError,
    Cancelled,
    RunFailedError,
    UsageError,
)

if TYPE_CHECKING:
    from agentctl.engine.executor import ExecutionOptions, RunOutcome
    from agentctl.store.engine import Store

InputOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        help="KEY=VALUE input override (value parsed as JSON, else a string); repeatable.",
    ),
]
InputsOption = Annotated[str | None, typer.Option("--inputs", help="A JSON object of inputs.")]
InputsFileOption = Annotated[
    str | None, typer.Option("--inputs-file", help="A file holding a JSON object of inputs.")
]
WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        "--workspace", help="Base directory for paths (default: the workflow file's directory)."
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout-seconds", help="Cancel the whole command after N seconds (exit 130).", min=0.001
    ),
]
InteractiveOption = Annotated[
    bool,
    typer.Option("--interactive", help="Answer approvals at the terminal (needs a terminal)."),
]
DiffOption = Annotated[bool, typer.Option("--diff", help="Fill builtin.write's diff output.")]

_EXIT_BY_STATE = {
    "succeeded": EXIT_OK,
    "paused": EXIT_BLOCKED,
    "cancelled": EXIT_CANCELLED,
    "failed": EXIT_RUN_FAILED,
}


def _terminal_approver() -> Callable[[dict[str, Any]], Awaitable[bool]]:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BlockedError(
            "--interactive needs a terminal on stdin and stdout",
            code="cli.no_terminal",
            hint="drop --interactive: the run will pause and you can approve with "
            "`agentctl approvals approve`",
        )

    async def approve(request: dict[str, Any]) -> bool:
        prompt = (
            f"approve {request['operation']} for task {request['taskId']} "
            f"(risk {request['risk']})? {request['prompt']} [y/N] "
        )
        answer = await asyncio.to_thread(input, prompt)
        return answer.strip().lower() in ("y", "yes")

    return approve


def _options(
    *, check: bool, diff: bool, interactive: bool, workspace: str | None
) -> tuple[ExecutionOptions, Progress]:
    from agentctl.engine.executor import ExecutionOptions

    out = output.current()
    if interactive and out.machine:
        raise UsageError("--interactive cannot be combined with --output json/jsonl")
    # The live view would fight with the approval prompts for the terminal.
    progress = Progress(out, live=not interactive)
    options = ExecutionOptions(
        check=check,
        diff=diff,
        approver=_terminal_approver() if interactive else None,
        events=progress.event,
        workspace=workspace,
    )
    return options, progress


def _drive(
    store: Store, run_id: str, options: ExecutionOptions, timeout: float | None
) -> RunOutcome:
    """Run the executor with SIGINT/SIGTERM and --timeout-seconds as cancellation."""
    from agentctl.engine.executor import RunExecutor, finished_outcome
    from agentctl.engine.next_steps import for_run, render
    from agentctl.ids import SystemClock
    from agentctl.store.health import checkpoint_wal, require_undamaged

    finished = finished_outcome(store, run_id)
    if finished is not None:
        return finished
    require_undamaged(store.path)

    async def main() -> RunOutcome:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel, f"interrupted by {sig.name}")
        # The message a cancelled task carries becomes the run's recorded reason, so a
        # timeout says it timed out.
        timer = (
            None
            if timeout is None
            else loop.call_later(
                timeout, task.cancel, f"timed out after {timeout:g}s (--timeout-seconds)"
            )
        )
        try:
            executor = RunExecutor(store, run_id, clock=SystemClock(), options=options)
            return await executor.execute()
        except asyncio.CancelledError as stop:  # stopped before the executor took over
            raise Cancelled(next(iter(stop.args), None) or "interrupted", run_id=run_id) from None
        finally:
            if timer is not None:
                timer.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(main())
    except Cancelled as cancelled:
        if cancelled.hint is None and cancelled.run_id and not store.in_memory:
            # The suggestions must never hide the cancellation itself.
            with contextlib.suppress(AgentctlError):
                cancelled.hint = render(for_run(store, cancelled.run_id))
        raise
    finally:
        # A parked or finished run is in the main file, not only in the WAL: an operator
        # who copies the database file alone keeps every confirmed state.
        checkpoint_wal(store)


def _auto_compensate(
    store: Store, outcome: RunOutcome, options: ExecutionOptions, timeout: float | None
) -> str | None:
    """``spec.compensation.onFailure: automatic``: compensate right after a failed run."""
    if outcome.state != "failed":
        return None
    from agentctl.engine.compensation import create_compensation_run, plan_compensation
    from agentctl.engine.records import load_run
    from agentctl.ids import IdGenerator, SystemClock

    with store.read() as conn:
        run = load_run(conn, outcome.run_id)
    setting = ((run.workflow.get("spec") or {}).get("compensation") or {}).get("onFailure")
    if run.mode == "compensate" or setting != "automatic":
        return None
    clock = SystemClock()
    plan = plan_compensation(store, run.id)
    compensation_id = create_compensation_run(store, plan, clock=clock, ids=IdGenerator(clock))
    if compensation_id is None:
        return None
    output.current().event(
        "RunEvent",
        {"runId": compensation_id, "state": "running", "sourceRunId": run.id},
        human=f"{compensation_id} compensating {run.id} (onFailure: automatic)",
    )
    result = _drive(store, compensation_id, options, timeout)
    return f"{compensation_id} {result.state}"


def _changes_text(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return "dry run: the workspace was not touched, and the run changed no file in its copy"
    marks = {"added": "A", "modified": "M", "deleted": "D"}
    lines = ["dry run: the workspace was not touched; in its copy the run changed:"]
    for item in changes:
        lines.append(f"  {marks[item['change']]} {item['path']}")
        if item.get("diff"):
            lines.append(item["diff"].rstrip("\n"))
    return "\n".join(lines)


def _outputs_text(value: Any) -> str:
    """The run's outputs, one ``key: value`` line each (values as compact JSON)."""
    import json

    if not isinstance(value, dict):
        return "output: " + json.dumps(value, ensure_ascii=False, default=str)
    lines = ["outputs:"]
    for key, item in value.items():
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, default=str)
        lines.append(f"  {key}: {text}")
    return "\n".join(lines)


def _report(
    outcome: RunOutcome,
    *,
    store: Store | None = None,
    dry_run: bool = False,
    compensation: str | None = None,
    changes: list[dict[str, Any]] | None = None,
) -> int:
    """Print how a run stopped and the commands that take it further (none for a dry run,
    whose state is gone)."""
    from agentctl.engine.next_steps import for_run, render
    from agentctl.engine.summary import run_summary, summary_text

    out = output.current()
    run_id = outcome.run_id
    steps: list[Any] = []
    summary = None
    if store is not None and not store.in_memory:
        # How the run ended is reported even if the suggestions cannot be read.
        with contextlib.suppress(AgentctlError):
            summary = run_summary(store, run_id)
            steps = [] if dry_run else for_run(store, run_id)
    if changes is not None and outcome.state in ("failed", "cancelled"):
        out.event("DryRunChanges", {"changedFiles": changes}, human=_changes_text(changes))
    if outcome.state == "failed":
        error = outcome.error or {}
        compensated = f"; compensation run {compensation}" if compensation else ""
        after = f" ({summary_text(summary)})" if summary else ""
        raise RunFailedError(
            f"run {run_id} failed: {error.get('message', 'a task failed')}{compensated}{after}",
            code=str(error.get("code") or "run.failed"),
            run_id=run_id,
            hint=render(steps) if steps else None,
        )
    human: str = f"{run_id} {outcome.state}"
    data = outcome.to_json()
    if summary is not None:
        data["summary"] = summary
        human = f"{run_id} {summary_text(summary)}"
        if outcome.state == "succeeded" and outcome.output is not None:
            human = _outputs_text(outcome.output) + "\n" + human
    if changes is not None:
        data["changedFiles"] = changes
        human = f"{_changes_text(changes)}\n{human}"
    if dry_run and outcome.state == "paused":
        # The state lived in memory: no command can approve, reconcile or resume it.
        waiting = [*outcome.pending_approvals, *outcome.paused_tasks] or [
            e["effectId"] for e in outcome.uncertain_effects
        ]
        note = (
            "this dry run parked, and its state (kept in memory) is gone: nothing can "
            "approve, reconcile or resume it; run without --dry-run to continue past "
            + ", ".join(waiting)
        )
        data["note"] = note
        out.success("RunOutcome", data, human=f"{human}: {note}")
        return _EXIT_BY_STATE.get(outcome.state, EXIT_RUN_FAILED)
    if outcome.pending_approvals:
        human += f": waiting for {', '.join(outcome.pending_approvals)}"
    if outcome.paused_tasks:
        human += f": paused by {', '.join(outcome.paused_tasks)} (builtin.pause)"
    if outcome.uncertain_effects:
        human += "\n  uncertain: " + ", ".join(
            f"{e['effectId']} ({e['operation']})" for e in outcome.uncertain_effects
        )
    if steps:
        data["next"] = [step.to_json() for step in steps]
        human += next_lines(data["next"])
    out.success("RunOutcome", data, human=human)
    return _EXIT_BY_STATE.get(outcome.state, EXIT_RUN_FAILED)


def roll_command(
    ctx: typer.Context,
    workflow: Annotated[str, typer.Argument(help="Workflow file (.yaml, .yml, .json or .py).")],
    db: DbOption = None,
    input_pairs: InputOption = None,
    inputs: InputsOption = None,
    inputs_file: InputsFileOption = None,
    workspace: WorkspaceOption = None,
    timeout_seconds: TimeoutOption = None,
    interactive: InteractiveOption = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Predict: run pure work and reads, mutate nothing, keep no state."
        ),
    ] = False,
    diff: DiffOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Keep all state in memory and run in a throwaway copy of the workspace; "
            "print the files the run would change (their diffs with --diff).",
        ),
    ] = False,
) -> int:
    """Compile a workflow, create a run and execute it.

    Exit codes: 0 succeeded, 3 paused for an approval or question (or blocked by an
    uncertain effect), 4 failed, 130 cancelled.

    Example: agentctl roll release.workflow.yaml --dry-run --diff
    """
    from agentctl.engine.runs import prepare_run
    from agentctl.ids import SystemClock

    prepared = prepare_run(
        workflow,
        inputs_json=inputs,
        inputs_file=inputs_file,
        input_pairs=input_pairs or [],
        workspace=workspace,
    )
    options, progress = _options(
        check=check, diff=diff, interactive=interactive, workspace=workspace
    )
    ephemeral = check or dry_run
    path = ":memory:" if ephemeral else db_from_context(ctx, db)
    clock = SystemClock()
    throwaway = None
    if dry_run and not check:
        from agentctl.engine.dry_run import ThrowawayWorkspace

        policy = (prepared.workflow.get("spec") or {}).get("policy") or {}
        throwaway = ThrowawayWorkspace(prepared.workspace, dict(policy))
    with contextlib.ExitStack() as scope:
        if throwaway is not None:
            # Writes and processes happen in a copy; the summary lists what they changed.
            scope.enter_context(throwaway)
            prepared = dataclasses.replace(prepared, workspace=throwaway.copy)
            options.workspace = str(throwaway.copy)
        return _roll(
            store_path=path,
            prepared=prepared,
            options=options,
            progress=progress,
            clock=clock,
            check=check,
            ephemeral=ephemeral,
            timeout_seconds=timeout_seconds,
            throwaway=throwaway,
            diff=diff,
        )


def _roll(
    *,
    store_path: str,
    prepared: Any,
    options: ExecutionOptions,
    progress: Progress,
    clock: Any,
    check: bool,
    ephemeral: bool,
    timeout_seconds: float | None,
    throwaway: Any,
    diff: bool,
) -> int:
    from agentctl.engine.runs import create_run
    from agentctl.ids import IdGenerator
    from agentctl.store.engine import open_store
    from agentctl.store.health import require_undamaged

    with open_store(store_path) as store:
        require_undamaged(store.path)
        run_id = create_run(
            store, prepared, clock=clock, ids=IdGenerator(clock), probe_isolation=not check
        )
        output.current().event(
            "RunEvent",
            {"runId": run_id, "state": "running"},
            human=f"{run_id} running {prepared.plan.workflow_name} "
            f"({len(prepared.plan.order)} tasks)",
        )
        with progress:
            outcome = _drive(store, run_id, options, timeout_seconds)
            compensation = _auto_compensate(store, outcome, options, timeout_seconds)
        changes = None if throwaway is None else throwaway.changes(diff=diff)
        return _report(
            outcome,
            store=None if ephemeral else store,
            dry_run=ephemeral,
            compensation=compensation,
            changes=changes,
        )


def resume_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    timeout_seconds: TimeoutOption = None,
    interactive: InteractiveOption = False,
    diff: DiffOption = False,
) -> int:
    """Continue a paused or interrupted run from its durable state.

    Confirmed effects are reused, never redone; an effect that started but never confirmed
    becomes uncertain and blocks the run (exit 3) until `agentctl reconcile` concludes it.

    Example: agentctl resume RUN
    """
    from agentctl.store.engine import open_store

    options, progress = _options(
        check=False, diff=diff, interactive=interactive, workspace=workspace
    )
    with open_store(db_from_context(ctx, db), create=False) as store:
        with progress:
            outcome = _drive(store, run_id, options, timeout_seconds)
            compensation = _auto_compensate(store, outcome, options, timeout_seconds)
        return _report(outcome, store=store, compensation=compensation)


def cancel_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to cancel.")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept in the audit log).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Request cancellation: the process executing the run stops owned work and exits 130.

    A run that no process is executing (paused, or its process died) is cancelled at once.

    Example: agentctl cancel RUN --reason 'wrong branch'
    """
    from agentctl.engine.operations import cancel_run
    from agentctl.ids import SystemClock
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        data = cancel_run(store, run_id, reason, clock=SystemClock())
    note = data.get("note")
    output.current().success(
        "CancelRequest", data, human=f"{run_id} {data['state']}" + (f" ({note})" if note else "")
    )
