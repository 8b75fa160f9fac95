"""``agentctl roll`` (alias ``run``), ``resume`` and ``cancel``."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl import observability
from agentctl.cli import output
from agentctl.cli.options import DbOption, VarOption, VarsFileOption, db_from_context
from agentctl.cli.output import next_lines
from agentctl.cli.progress import Progress
from agentctl.errors import (
    EXIT_BLOCKED,
    EXIT_CANCELLED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    AgentctlError,
    RunFailedError,
    UsageError,
)

if TYPE_CHECKING:
    from agentctl.runtime import RunResult, Runtime
    from agentctl.runtime_records import RunRecap

InputOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        help="KEY=VALUE input override; repeatable. An input spec.inputSchema types as a "
        'string keeps the text (version=3.10 stays "3.10"); any other is read as JSON when '
        "it parses, else as text. `plan --input` shows how each was read.",
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
        # A usage error (exit 2), as with --output json: the command line asks for something
        # this invocation cannot give, and nothing was created or paused. Exit 3 would send
        # a script looking for a pending approval that does not exist.
        raise UsageError(
            "--interactive needs a terminal on stdin and stdout",
            code="cli.no_terminal",
            hint="drop --interactive: the run will pause at an approval and you can approve "
            "it with `agentctl approvals approve`",
        )

    import asyncio

    async def approve(request: dict[str, Any]) -> bool:
        prompt = (
            f"approve {request['operation']} for task {request['taskId']} "
            f"(risk {request['risk']})? {request['prompt']} [y/N] "
        )
        answer = await asyncio.to_thread(input, prompt)
        return answer.strip().lower() in ("y", "yes")

    return approve


def runtime_for(db: str, *, interactive: bool) -> tuple[Runtime, Progress]:
    """The facade the commands drive, wired to this command's output and terminal."""
    from agentctl.runtime import Runtime

    out = output.current()
    if interactive and out.machine:
        raise UsageError("--interactive cannot be combined with --output json/jsonl")
    # Imports OpenTelemetry only when --otel or the OTEL_* variables ask for it.
    observability.activate(os.environ, warn=None if out.machine else out.warning)
    # The live view would fight with the approval prompts for the terminal.
    progress = Progress(out, live=not interactive)

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "created":
            _created(out, data)
        else:
            progress.event(kind, data)

    runtime = Runtime(
        db,
        on_event=on_event,
        approver=_terminal_approver() if interactive else None,
        handle_signals=True,
    )
    return runtime, progress


def _created(out: output.Output, data: dict[str, Any]) -> None:
    """The line that announces a new run (a ``RunEvent`` in jsonl mode)."""
    run_id, mode, source = data["runId"], data.get("mode"), data.get("sourceRunId")
    event: dict[str, Any] = {"runId": run_id, "state": "running"}
    if mode == "execute":
        count = data["tasks"]
        human = f"{run_id} running {data['workflow']} ({count} task{'' if count == 1 else 's'})"
    elif data.get("automatic"):
        human = f"{run_id} compensating {source} (onFailure: automatic)"
    elif mode == "compensate":
        human = f"{run_id} compensating {data['tasks']} task(s) of {source}"
    else:
        human = f"{run_id} {mode} of {source}: {data['reused']} reused"
    if source is not None:
        event["sourceRunId"] = source
    out.event("RunEvent", event, human=human)


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


def report_result(outcome: RunResult, *, dry_run: bool = False, db: str | None = None) -> int:
    """Print where a run stopped, its summary and the commands that take it further (read
    from ``db``; none for a dry run, whose state is gone). The exit code says what it needs;
    a failure raises."""
    from agentctl.runtime import Runtime

    out = output.current()
    run_id = outcome.run_id
    changes = outcome.changed_files
    follow = outcome.compensation
    compensation = None if follow is None else f"{follow.run_id} {follow.state}"
    recap: RunRecap | None = None
    if db is not None and not dry_run:
        # How the run ended is reported even if its totals and next steps cannot be read.
        with contextlib.suppress(AgentctlError):
            recap = Runtime(db).recap(run_id)
    if changes is not None and outcome.state in ("failed", "cancelled"):
        out.event("DryRunChanges", {"changedFiles": changes}, human=_changes_text(changes))
    if outcome.state == "failed":
        error = outcome.error or {}
        compensated = f"; compensation run {compensation}" if compensation else ""
        after = f" ({recap.totals.text()})" if recap else ""
        raise RunFailedError(
            f"run {run_id} failed: {error.get('message', 'a task failed')}{compensated}{after}",
            code=str(error.get("code") or "run.failed"),
            run_id=run_id,
            hint=None if recap is None else recap.hint(),
        )
    human: str = f"{run_id} {outcome.state}"
    data = outcome.to_json()
    if recap is not None:
        data["summary"] = recap.totals.to_json()
        human = f"{run_id} {recap.totals.text()}"
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
    if recap is not None and recap.next:
        data["next"] = [step.to_json() for step in recap.next]
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
    var_pairs: VarOption = None,
    vars_files: VarsFileOption = None,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            help="Create the run and leave it to `agentctl worker` processes (PostgreSQL): "
            "print its id and exit 0; `agentctl runs wait RUN` follows it.",
        ),
    ] = False,
) -> int:
    """Compile a workflow, create a run and execute it.

    Exit codes: 0 succeeded, 3 paused for an approval or question (or blocked by an
    uncertain effect), 4 failed, 130 cancelled. With --detach: 0 once the run is created.

    Variables (--vars-file, --var) are recorded with the run: resume, replay, retry and
    repair use the values the run was created with. A name (not a path) is looked up in the
    project's workflow directories: its metadata.name or its file stem; an ambiguous or
    unknown name exits 2.

    Example: agentctl roll release.workflow.yaml --dry-run --diff
    Example: agentctl roll deploy.yaml --vars-file staging.yaml --var replicas=5
    Example: agentctl roll hello --input changeFile=change.txt
    """
    from agentctl.runtime import Runtime
    from agentctl.spec import merge_inputs

    workflow = Runtime.resolve_workflow(workflow)

    # Defaults come from the workflow; the flags only override them (--inputs/--inputs-file
    # first, then each --input).
    # Each --input is read once the workflow's inputSchema is known (a declared string
    # keeps its text), so only the object of --inputs/--inputs-file is parsed here.
    overrides = merge_inputs({}, inputs, inputs_file, check_declared=False)
    ephemeral = check or dry_run
    if detach:
        if ephemeral:
            raise UsageError(
                "--detach leaves the run to workers; it cannot be combined with --check or "
                "--dry-run, which keep no state",
                code="cli.conflicting_options",
            )
        queued = Runtime(db_from_context(ctx, db)).submit(
            workflow,
            overrides,
            workspace=workspace,
            vars_files=vars_files or (),
            var_pairs=var_pairs or (),
            input_pairs=input_pairs or (),
        )
        output.current().success(
            "RunQueued",
            {"runId": queued.run_id, "state": "running", "detached": True},
            human=f"{queued.run_id} released to workers ({queued.workflow}, "
            f"{queued.tasks} tasks)\n  follow it with: agentctl runs wait {queued.run_id}",
        )
        return EXIT_OK
    runtime, progress = runtime_for(
        ":memory:" if ephemeral else db_from_context(ctx, db), interactive=interactive
    )
    with progress:
        result = runtime.roll(
            workflow,
            overrides,
            workspace=workspace,
            timeout=timeout_seconds,
            check=check,
            dry_run=dry_run,
            diff=diff,
            vars_files=vars_files or (),
            var_pairs=var_pairs or (),
            input_pairs=input_pairs or (),
        )
    return report_result(
        result, dry_run=ephemeral, db=None if ephemeral else db_from_context(ctx, db)
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
    return drive_and_report(
        db_from_context(ctx, db),
        run_id,
        workspace=workspace,
        timeout_seconds=timeout_seconds,
        interactive=interactive,
        diff=diff,
    )


def drive_and_report(
    db: str,
    run_id: str,
    *,
    workspace: str | None = None,
    timeout_seconds: float | None = None,
    interactive: bool = False,
    diff: bool = False,
) -> int:
    """Execute an existing run in the foreground and report it as `roll` does (resume,
    and `schedule trigger` for the run it just created)."""
    runtime, progress = runtime_for(db, interactive=interactive)
    with progress:
        result = runtime.resume(run_id, workspace=workspace, timeout=timeout_seconds, diff=diff)
    return report_result(result, db=db)


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
    from agentctl.runtime import Runtime

    done = Runtime(db_from_context(ctx, db)).cancel(run_id, reason)
    note = f" ({done.note})" if done.note else ""
    output.current().success("CancelRequest", done.to_json(), human=f"{run_id} {done.state}{note}")
