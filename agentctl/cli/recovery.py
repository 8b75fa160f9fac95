"""``agentctl replay``, ``retry``, ``repair`` and ``fork``: new runs linked to a source.

Each plans first, effect-free; ``--plan`` prints the plan (reuse / execute / blocked and
why, per task) and creates nothing. A blocked plan exits 3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, VarOption, VarsFileOption, db_from_context
from agentctl.cli.running import TimeoutOption, report_result, runtime_for
from agentctl.errors import EXIT_BLOCKED, EXIT_OK
from agentctl.runtime import RecoveryRequest, Runtime

if TYPE_CHECKING:
    from agentctl.cli.progress import Progress

SourceArgument = Annotated[str, typer.Argument(help="The source run.")]
FileArgument = Annotated[str, typer.Argument(help="The workflow file.")]
PlanOption = Annotated[
    bool, typer.Option("--plan", help="Print what would be reused or executed; create nothing.")
]
FromOption = Annotated[
    list[str] | None,
    typer.Option("--from", help="Re-run this task and its descendants; repeatable."),
]
RestartOption = Annotated[
    bool,
    typer.Option("--restart-successful", help="Reuse nothing: execute successful tasks too."),
]
ReasonOption = Annotated[str | None, typer.Option("--reason", help="Why (kept with the new run).")]
WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        help="Base directory for paths (default: the workspace the source run recorded).",
    ),
]


def _print_plan(runtime: Runtime, request: RecoveryRequest) -> int:
    out = output.current()
    data = runtime.plan(request).to_json()

    def human() -> None:
        counts = data["counts"]
        print(
            f"{data['mode']} of {data['sourceRunId']}: {counts['reuse']} reuse, "
            f"{counts['execute']} execute, {counts['blocked']} blocked",
            file=out.stdout,
        )
        for decision in data["tasks"]:
            print(
                f"  {decision['action']:<8} {decision['taskId']}  ({decision['reason']})",
                file=out.stdout,
            )

    out.success("RecoveryPlan", data, human=human)
    return EXIT_BLOCKED if data["counts"]["blocked"] else EXIT_OK


def retry_command(
    ctx: typer.Context,
    workflow: FileArgument,
    source_run_id: SourceArgument,
    failed: Annotated[
        bool, typer.Option("--failed", help="Re-run the tasks that failed (and their descendants).")
    ] = False,
    from_tasks: FromOption = None,
    plan: PlanOption = False,
    restart_successful: RestartOption = False,
    reason: ReasonOption = None,
    workspace: WorkspaceOption = None,
    timeout_seconds: TimeoutOption = None,
    db: DbOption = None,
) -> int:
    """Retry a finished run of the identical workflow, reusing every successful boundary.

    The workflow digest must match the source's (else exit 3: use `repair`). Failed tasks
    (--failed) or the chosen ones (--from) and their descendants run with fresh attempts.
    The new run works in the source run's workspace unless --workspace says otherwise.

    Example: agentctl retry review.yaml RUN --failed --workspace ./checkout
    """
    runtime, progress = runtime_for(db_from_context(ctx, db), interactive=False)
    request = RecoveryRequest(
        "retry",
        source_run_id,
        workflow,
        failed=failed,
        from_tasks=from_tasks or (),
        restart_successful=restart_successful,
        workspace=workspace,
        reason=reason,
    )
    return _recover(ctx, db, runtime, progress, request, plan=plan, timeout=timeout_seconds)


def repair_command(
    ctx: typer.Context,
    workflow: FileArgument,
    source_run_id: SourceArgument,
    from_tasks: FromOption = None,
    plan: PlanOption = False,
    restart_successful: RestartOption = False,
    reason: ReasonOption = None,
    workspace: WorkspaceOption = None,
    timeout_seconds: TimeoutOption = None,
    db: DbOption = None,
    var_pairs: VarOption = None,
    vars_files: VarsFileOption = None,
) -> int:
    """Run a changed workflow, reusing only source results that are still compatible.

    A task is reused when its definition, dependencies, resolved input, output contract and
    value, memory writes and effect certainty all still hold; everything else runs. Without
    --var/--vars-file the source run's invocation variables are used again; with them, they
    replace those values (a task whose variables changed runs again). The new run works in
    the source run's workspace unless --workspace says otherwise.

    Example: agentctl repair deploy.yaml run-0192… --from build --var replicas=4
    """
    runtime, progress = runtime_for(db_from_context(ctx, db), interactive=False)
    request = RecoveryRequest(
        "repair",
        source_run_id,
        workflow,
        from_tasks=from_tasks or (),
        restart_successful=restart_successful,
        workspace=workspace,
        vars_files=vars_files or (),
        var_pairs=var_pairs or (),
        reason=reason,
    )
    return _recover(ctx, db, runtime, progress, request, plan=plan, timeout=timeout_seconds)


def fork_command(
    ctx: typer.Context,
    source_run_id: SourceArgument,
    plan: PlanOption = False,
    reason: ReasonOption = None,
    workspace: WorkspaceOption = None,
    timeout_seconds: TimeoutOption = None,
    db: DbOption = None,
) -> int:
    """Start a new linked run of the stored workflow that deliberately runs every effect.

    Example: agentctl fork RUN --plan
    """
    runtime, progress = runtime_for(db_from_context(ctx, db), interactive=False)
    request = RecoveryRequest("fork", source_run_id, workspace=workspace, reason=reason)
    return _recover(ctx, db, runtime, progress, request, plan=plan, timeout=timeout_seconds)


def _recover(
    ctx: typer.Context,
    db: str | None,
    runtime: Runtime,
    progress: Progress,
    request: RecoveryRequest,
    *,
    plan: bool,
    timeout: float | None,
) -> int:
    """``--plan`` prints the plan; otherwise the new run is created and executed."""
    if plan:
        return _print_plan(runtime, request)
    with progress:
        result = runtime.recover(request, timeout=timeout)
    assert result is not None, "only a compensation can find nothing to do"
    return report_result(result, db=db_from_context(ctx, db))


def replay_command(
    ctx: typer.Context,
    source_run_id: SourceArgument,
    db: DbOption = None,
) -> int:
    """Rebuild a finished run from its records; no provider, tool or process is called.

    Example: agentctl replay RUN
    """
    result = Runtime(db_from_context(ctx, db)).recover(RecoveryRequest("replay", source_run_id))
    assert result is not None, "a replay always creates a run"
    if result.state == "failed":
        return report_result(result, db=db_from_context(ctx, db))
    data = result.to_json()
    data["sourceRunId"] = source_run_id
    output.current().success(
        "RunOutcome", data, human=f"{result.run_id} {result.state} (replay of {source_run_id})"
    )
    return EXIT_OK


def compensate_command(
    ctx: typer.Context,
    source_run_id: SourceArgument,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", help="Only compensate this task; repeatable."),
    ] = None,
    plan: PlanOption = False,
    workspace: WorkspaceOption = None,
    timeout_seconds: TimeoutOption = None,
    db: DbOption = None,
) -> int:
    """Undo a finished run's confirmed mutations with the declared inverse actions.

    Tasks that declare `compensate` run their inverse in reverse compiled order, one at a
    time, in a new linked run. Effects still started or uncertain block the plan (exit 3)
    until reconciled; already compensated ones are skipped.

    Example: agentctl compensate RUN --plan
    """
    out = output.current()
    runtime, progress = runtime_for(db_from_context(ctx, db), interactive=False)
    request = RecoveryRequest("compensate", source_run_id, tasks=task or (), workspace=workspace)
    if plan:
        data = runtime.plan(request).to_json()

        def human() -> None:
            if not data["steps"]:
                print(f"nothing in {source_run_id} declares compensate", file=out.stdout)
            for step in data["steps"]:
                print(
                    f"  {step['action']:<10} {step['compensationTaskId']}  ({step['reason']})",
                    file=out.stdout,
                )

        out.success("CompensationPlan", data, human=human)
        return EXIT_OK if data["complete"] else EXIT_BLOCKED
    with progress:
        result = runtime.recover(request, timeout=timeout_seconds)
    if result is None:
        out.success(
            "CompensationPlan",
            runtime.plan(request).to_json(),
            human=f"nothing to compensate in {source_run_id}",
        )
        return EXIT_OK
    return report_result(result, db=db_from_context(ctx, db))
