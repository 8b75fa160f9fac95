"""``agentctl replay``, ``retry``, ``repair`` and ``fork``: new runs linked to a source.

Each plans first, effect-free; ``--plan`` prints the plan (reuse / execute / blocked and
why, per task) and creates nothing. A blocked plan exits 3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.cli.running import TimeoutOption, WorkspaceOption, _drive, _options, _report
from agentctl.errors import EXIT_BLOCKED, EXIT_OK

if TYPE_CHECKING:
    from agentctl.engine.recovery import RecoveryPlan
    from agentctl.store.engine import Store

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


def _print_plan(recovery: RecoveryPlan) -> int:
    out = output.current()
    data = recovery.to_json()

    def human() -> None:
        counts = data["counts"]
        print(
            f"{recovery.mode} of {recovery.source.id}: {counts['reuse']} reuse, "
            f"{counts['execute']} execute, {counts['blocked']} blocked",
            file=out.stdout,
        )
        for decision in recovery.decisions:
            print(
                f"  {decision.action:<8} {decision.task_id}  ({decision.reason})", file=out.stdout
            )

    out.success("RecoveryPlan", data, human=human)
    return EXIT_BLOCKED if recovery.blocked else EXIT_OK


def _run(
    store: Store,
    recovery: RecoveryPlan,
    reason: str | None,
    workspace: str | None,
    timeout: float | None,
) -> int:
    from agentctl.engine.recovery import create_derived_run
    from agentctl.ids import IdGenerator, SystemClock

    clock = SystemClock()
    options, progress = _options(check=False, diff=False, interactive=False, workspace=workspace)
    run_id = create_derived_run(store, recovery, clock=clock, ids=IdGenerator(clock), reason=reason)
    reused = sum(1 for d in recovery.decisions if d.action == "reuse")
    output.current().event(
        "RunEvent",
        {"runId": run_id, "state": "running", "sourceRunId": recovery.source.id},
        human=f"{run_id} {recovery.mode} of {recovery.source.id}: {reused} reused",
    )
    with progress:
        outcome = _drive(store, run_id, options, timeout)
    return _report(outcome, store=store)


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

    Example: agentctl retry review.yaml RUN --failed
    """
    from agentctl.engine.recovery import plan_retry
    from agentctl.engine.runs import prepare_run
    from agentctl.store.engine import open_store

    prepared = prepare_run(workflow, workspace=workspace)
    with open_store(db_from_context(ctx, db), create=False) as store:
        recovery = plan_retry(
            store,
            source_run_id,
            prepared,
            failed=failed,
            from_tasks=from_tasks or [],
            restart_successful=restart_successful,
        )
        if plan:
            return _print_plan(recovery)
        return _run(store, recovery, reason, workspace, timeout_seconds)


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
) -> int:
    """Run a changed workflow, reusing only source results that are still compatible.

    A task is reused when its definition, dependencies, resolved input, output contract and
    value, memory writes and effect certainty all still hold; everything else runs.

    Example: agentctl repair review.yaml RUN --from build
    """
    from agentctl.engine.recovery import plan_repair
    from agentctl.engine.runs import prepare_run
    from agentctl.store.engine import open_store

    prepared = prepare_run(workflow, workspace=workspace)
    with open_store(db_from_context(ctx, db), create=False) as store:
        recovery = plan_repair(
            store,
            source_run_id,
            prepared,
            from_tasks=from_tasks or [],
            restart_successful=restart_successful,
        )
        if plan:
            return _print_plan(recovery)
        return _run(store, recovery, reason, workspace, timeout_seconds)


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
    from agentctl.engine.recovery import plan_fork
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        recovery = plan_fork(store, source_run_id)
        if plan:
            return _print_plan(recovery)
        return _run(store, recovery, reason, workspace, timeout_seconds)


def replay_command(
    ctx: typer.Context,
    source_run_id: SourceArgument,
    db: DbOption = None,
) -> int:
    """Rebuild a finished run from its records; no provider, tool or process is called.

    Example: agentctl replay RUN
    """
    from agentctl.engine.executor import finished_outcome
    from agentctl.engine.recovery import replay_run
    from agentctl.ids import IdGenerator, SystemClock
    from agentctl.store.engine import open_store

    clock = SystemClock()
    with open_store(db_from_context(ctx, db), create=False) as store:
        run_id = replay_run(store, source_run_id, clock=clock, ids=IdGenerator(clock))
        outcome = finished_outcome(store, run_id)
        assert outcome is not None
        if outcome.state == "failed":
            return _report(outcome, store=store)
    data = outcome.to_json()
    data["sourceRunId"] = source_run_id
    output.current().success(
        "RunOutcome", data, human=f"{run_id} {outcome.state} (replay of {source_run_id})"
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
    from agentctl.engine.compensation import create_compensation_run, plan_compensation
    from agentctl.ids import IdGenerator, SystemClock
    from agentctl.store.engine import open_store

    out = output.current()
    with open_store(db_from_context(ctx, db), create=False) as store:
        compensation = plan_compensation(store, source_run_id, only=task or None)
        if plan:
            data = compensation.to_json()

            def human() -> None:
                if not compensation.steps:
                    print(f"nothing in {source_run_id} declares compensate", file=out.stdout)
                for step in compensation.steps:
                    print(
                        f"  {step.action:<10} {step.compensation_task_id}  ({step.reason})",
                        file=out.stdout,
                    )

            out.success("CompensationPlan", data, human=human)
            return EXIT_BLOCKED if compensation.blocked else EXIT_OK
        clock = SystemClock()
        run_id = create_compensation_run(store, compensation, clock=clock, ids=IdGenerator(clock))
        if run_id is None:
            out.success(
                "CompensationPlan",
                compensation.to_json(),
                human=f"nothing to compensate in {source_run_id}",
            )
            return EXIT_OK
        options, progress = _options(
            check=False, diff=False, interactive=False, workspace=workspace
        )
        out.event(
            "RunEvent",
            {"runId": run_id, "state": "running", "sourceRunId": source_run_id},
            human=f"{run_id} compensating {len(compensation.runnable)} task(s) of {source_run_id}",
        )
        with progress:
            outcome = _drive(store, run_id, options, timeout_seconds)
        return _report(outcome, store=store)
