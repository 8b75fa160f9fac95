"""``agentctl runs list``, ``inspect RUN`` and ``audit RUN``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.graphs import GraphFormat
from agentctl.cli.options import DbOption, db_from_context

if TYPE_CHECKING:
    from agentctl.runtime_records import LegacyRunUpgradeAnalysis

runs_app = typer.Typer(name="runs", no_args_is_help=True)


@runs_app.callback()
def _runs_group(ctx: typer.Context, db: DbOption = None) -> None:
    """List runs; analyze and upgrade runs an older release recorded.

    Example: agentctl runs list --state failed
    """
    ctx.obj = {"db": db}


@runs_app.command("analyze")
def runs_analyze_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to analyze.")],
    db: DbOption = None,
) -> None:
    """Prove, task by task, which results of a run an older release recorded can carry
    this release's reuse metadata, and why not when not; writes nothing.

    Example: agentctl runs analyze RUN --output json
    """
    from agentctl.runtime import Runtime

    analysis = Runtime(db_from_context(ctx, db)).analyze_run(run_id)
    output.current().success(
        "LegacyRunUpgradeAnalysis", analysis.to_json(), human=_analysis_line(analysis)
    )


@runs_app.command("upgrade")
def runs_upgrade_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to upgrade.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be written; change nothing.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Persist the reuse metadata `runs analyze` proves for a finished run (conditional
    updates, audited as run.upgraded); running it again changes nothing.

    Example: agentctl runs upgrade RUN --dry-run
    """
    from agentctl.runtime import Runtime

    upgrade = Runtime(db_from_context(ctx, db)).upgrade_run(
        run_id, dry_run=dry_run, actor="cli-user"
    )
    tasks = upgrade.upgraded_tasks
    verb = "would upgrade" if upgrade.dry_run else "upgraded"
    output.current().success(
        "LegacyRunUpgrade",
        upgrade.to_json(),
        human=f"{run_id}: {verb} {len(tasks)} task(s)"
        + (f": {', '.join(tasks)}" if tasks else "")
        + "\n"
        + _analysis_line(upgrade.analysis_after or upgrade.analysis_before),
    )


def _analysis_line(analysis: LegacyRunUpgradeAnalysis) -> str:
    roots = ", ".join(analysis.recommended_repair_roots) or "none"
    lines = [
        f"{analysis.run_id}: {len(analysis.upgradeable_tasks)} upgradeable, "
        f"{len(analysis.unavailable_tasks)} unavailable"
        + (" (already current)" if analysis.already_current else "")
        + f"; repair roots: {roots}"
    ]
    for task in analysis.tasks:
        why = "; ".join(task.reasons)
        lines.append(f"  {task.task_id:<24} {task.confidence:<16} {why}".rstrip())
    return "\n".join(lines)


@runs_app.command("list")
def runs_list_command(
    ctx: typer.Context,
    status: Annotated[
        str | None,
        typer.Option(
            "--state",
            "--status",
            metavar="STATE",
            help="Only runs in this state (running, paused, succeeded, failed, cancelled).",
        ),
    ] = None,
    workflow: Annotated[
        str | None, typer.Option("--workflow", help="Only runs of this workflow name.")
    ] = None,
    limit: Annotated[
        int,
        typer.Option("--limit", metavar="N", help="At most this many runs, newest first.", min=1),
    ] = 50,
    schedule: Annotated[
        str | None, typer.Option("--schedule", help="Only runs this schedule started.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only runs started since then: an age (30m, 2h, 7d) or an ISO date or time "
            "(2026-01-31, 2026-01-31T09:00:00+01:00; UTC when no zone is given).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """List runs, newest first: state, workflow, start (UTC), duration, tasks done of total
    and approvals waiting.

    Example: agentctl runs list --state paused --since 2h --limit 10
    Example: agentctl runs list --schedule nightly-review --state failed
    """
    from agentctl import RunState, Runtime
    from agentctl.errors import UsageError

    states = [state.value for state in RunState]
    if status is not None and status not in states:
        raise UsageError(
            f"invalid value for --state: {status!r} (choose from {', '.join(states)})",
            code="cli.usage",
            hint="e.g. agentctl runs list --state failed",
        )
    from agentctl.ids import SystemClock

    now = SystemClock().now()  # a running run's duration and --since count from here
    cutoff = None if since is None else parse_since(since, now)
    listed = Runtime(db_from_context(ctx, db)).runs(
        status=status, workflow=workflow, limit=limit, since=cutoff, schedule=schedule
    )
    found = [run.to_json() for run in listed]
    out = output.current()

    def human() -> None:
        if not found:
            print("no runs", file=out.stdout)
            return
        print(_runs_table(found, now, color=out.use_color(out.stdout)), file=out.stdout)

    out.success("RunList", {"runs": found}, human=human)


def _runs_table(runs: list[dict[str, Any]], now: datetime, *, color: bool) -> str:
    from agentctl.cli.table import STATE_COLORS, Cell, duration_text, render, time_text

    rows = []
    for run in runs:
        started = datetime.fromisoformat(run["createdAt"]).replace(tzinfo=UTC)
        ended = (
            now
            if run["state"] == "running"
            else datetime.fromisoformat(run["updatedAt"]).replace(tzinfo=UTC)
        )
        tasks = run["tasks"]
        rows.append(
            [
                run["runId"],
                Cell(run["state"], STATE_COLORS.get(run["state"])),
                run["workflow"],
                time_text(run["createdAt"]),
                duration_text((ended - started).total_seconds()),
                f"{tasks['done']}/{tasks['total']}",
                Cell(str(run["waitingApprovals"]), "33" if run["waitingApprovals"] else None),
            ]
        )
    headers = ["RUN", "STATE", "WORKFLOW", "STARTED", "DURATION", "TASKS", "WAITING"]
    return render(headers, rows, color=color)


def parse_since(text: str, now: datetime) -> datetime:
    """``30m``, ``2h``, ``7d`` (before ``now``) or an ISO date or time (UTC by default)."""
    from agentctl.errors import UsageError

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    if len(text) > 1 and text[-1] in units and text[:-1].isdigit():
        return now - timedelta(seconds=int(text[:-1]) * units[text[-1]])
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"invalid value for --since: {text!r}",
            hint="give an age such as 30m, 2h or 7d, or an ISO date such as 2026-01-31",
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def inspect_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to inspect.")],
    graph: Annotated[
        GraphFormat | None,
        typer.Option(
            "--graph", help="Print the run's task graph, filled by task state, as mermaid or dot."
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Show a run: tasks, effects and reconciliations, approvals, checkpoints and audit.

    Example: agentctl inspect RUN --graph mermaid
    """
    from agentctl import Runtime
    from agentctl.cli.run_view import render_inspection

    if graph is not None:
        _print_run_graph(ctx, db, run_id, graph)
        return
    runtime = Runtime(db_from_context(ctx, db))
    data = runtime.inspect(run_id).to_json()
    # Inspecting is what the `inspect` step suggests: the others are what is next.
    data["next"] = [
        step.to_json()
        for step in runtime.next_steps(run_id)
        if not step.command.startswith("agentctl inspect ")
    ]
    out = output.current()

    def human() -> None:
        print(render_inspection(data, color=out.use_color(out.stdout)), file=out.stdout)

    out.success("RunInspection", data, human=human)


def _print_run_graph(ctx: typer.Context, db: str | None, run_id: str, fmt: GraphFormat) -> None:
    from agentctl import Runtime
    from agentctl.cli.graphs import plan_graph

    stored = Runtime(db_from_context(ctx, db)).plan_of(run_id)
    text = plan_graph(stored.plan, fmt.value, stored.task_states)
    out = output.current()
    if out.machine:
        out.success("RunGraph", {"runId": run_id, "format": fmt.value, "graph": text})
    else:
        out.stdout.write(text)
        out.emitted = True


def audit_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run whose audit log to show.")],
    verify: Annotated[
        bool, typer.Option("--verify", help="Check the hash chain; exit 5 when it is broken.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Print a run's ordered audit events; --verify checks the hash chain.

    Example: agentctl audit RUN --verify
    """
    from agentctl import Runtime

    log = Runtime(db_from_context(ctx, db)).audit(run_id, verify=verify)
    out = output.current()
    data = log.to_json()
    events, report = data["events"], log.chain

    def human() -> None:
        for event in events:
            where = event["taskId"] or ""
            print(
                f"{event['seq']:>5} {event['createdAt']} {event['kind']:<24} {where}",
                file=out.stdout,
            )
        if verify:
            print(f"chain verified: {report.events} events", file=out.stdout)
            if report.pending_events:
                print(
                    f"pending: {report.pending_events} events of claimed tasks in "
                    f"{report.pending_lanes} lanes (verified; the run's owner adopts them)",
                    file=out.stdout,
                )

    out.success("AuditLog", data, human=human)
