"""``agentctl monitor add|list|show|pause|resume|remove``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.cli.timed_groups import (
    InputPairsOption,
    TimedGroup,
    WorkspaceOption,
    add_shared_commands,
    new_schedule,
)

app = typer.Typer(
    name="monitor",
    help="Start a run when something changes: files, an HTTP endpoint, a command's result "
    "(observed by `agentctl daemon`)."
    "\n\nExample: agentctl monitor list",
    no_args_is_help=True,
)


@app.callback()
def _monitor_group(ctx: typer.Context, db: DbOption = None) -> None:
    """Start a run when something changes: files, an HTTP endpoint, a command's result.

    `agentctl daemon` observes; see docs/schedules.md.
    """
    ctx.obj = {"db": db}


def _now() -> Any:
    from agentctl.ids import SystemClock

    return SystemClock().now()


def _human(data: dict[str, Any]) -> str:
    state = "paused" if data["paused"] else f"every {data['everySeconds']}s"
    lines = [f"{data['name']}  {data['workflow']}  {data['kind']} {data['target']}  {state}"]
    for observation in data["observations"]:
        lines.append(f"  {observation['slot']} {observation['outcome']:<9} {observation['value']}")
    for firing in data["firings"]:
        why = f" ({firing['reason']})" if firing["reason"] else ""
        lines.append(f"  fired {firing['slot']} {firing['state']} {firing['runId'] or '-'}{why}")
    return "\n".join(lines)


def _target(
    files: list[str], http: str | None, expect_status: int | None, command: str | None
) -> tuple[str, dict[str, Any]]:
    import shlex

    from agentctl.errors import UsageError

    chosen = [bool(files), http is not None, command is not None]
    if sum(chosen) != 1:
        raise UsageError("give exactly one of --watch-files, --http and --command")
    if files:
        return "files", {"patterns": files}
    if http is not None:
        if not http.startswith(("http://", "https://")):
            raise UsageError(f"--http {http!r} is not an http:// or https:// URL")
        return "http", {"url": http, "expectStatus": expect_status}
    assert command is not None
    argv = shlex.split(command)
    if not argv:
        raise UsageError("--command is empty", hint='write for example --command "git describe"')
    return "command", {"argv": argv}


@app.command("add")
def add_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The monitor's name.")],
    workflow: Annotated[str, typer.Argument(help="A registered workflow name or a workflow file.")],
    watch_files: Annotated[
        list[str] | None,
        typer.Option("--watch-files", help="Glob under the current directory; repeatable."),
    ] = None,
    http: Annotated[str | None, typer.Option("--http", help="URL to GET.")] = None,
    expect_status: Annotated[
        int | None, typer.Option("--expect-status", help="With --http: the healthy status.")
    ] = None,
    command: Annotated[
        str | None,
        typer.Option(
            "--command",
            help="Command line to run (split like a shell, never run by one) under the "
            "workflow's builtin.shell.exec rules: its name must be in "
            "spec.policy.processAllowlist, and it runs in a container (or a sandbox) when "
            "the workflow's shell actions use isolation: container (or sandbox).",
        ),
    ] = None,
    every: Annotated[str, typer.Option("--every", help="Observe this often.")] = "30s",
    debounce: Annotated[
        str,
        typer.Option("--debounce", help="A change must stay this long before it fires."),
    ] = "0s",
    input_pairs: InputPairsOption = None,
    overlap: Annotated[
        str,
        typer.Option("--overlap", help="A change while the previous run is live: skip or allow."),
    ] = "skip",
    start: Annotated[
        str | None,
        typer.Option("--start", help="Observations come after this ISO time (default: now)."),
    ] = None,
    workspace: WorkspaceOption = None,
    db: DbOption = None,
) -> None:
    """Add a monitor. Each run gets the inputs previous, current and observedAt.

    A --command runs as the workflow's own shell commands would: allow-listed, and inside
    the container of its first `isolation: container` shell action if it has one, else the
    sandbox of its first `isolation: sandbox` one (never on the host then; when that level
    cannot start, the observation records the error).

    Example: agentctl monitor add docs-changed build-docs --watch-files 'docs/**/*.md'
    --debounce 30s

    Example: agentctl monitor add api-down incident --http http://127.0.0.1:8080/health
    --expect-status 200 --every 1m

    Example: agentctl monitor add new-tag release --command "git describe --tags" --every 5m
    """

    from agentctl.engine.run.creation import prepare_run
    from agentctl.errors import UsageError
    from agentctl.scheduling.monitors import MonitorTarget, add_monitor
    from agentctl.scheduling.registry import resolve_workflow
    from agentctl.scheduling.slots import parse_duration
    from agentctl.store.engine import open_store

    kind, target = _target(watch_files or [], http, expect_status, command)
    if overlap not in ("skip", "allow"):
        raise UsageError(f"--overlap {overlap!r} is not one of skip, allow")
    pairs = input_pairs or []
    prepared = prepare_run(resolve_workflow(workflow), input_pairs=pairs, workspace=workspace)
    if kind == "command":
        from agentctl.engine.monitor_commands import check_command

        check_command(prepared.workflow, target["argv"])
    monitor = MonitorTarget(kind, target, parse_duration(debounce, "--debounce"))
    now = _now()
    base = new_schedule(
        name=name,
        workflow=workflow,
        workflow_file=prepared.workflow_file,
        workspace=workspace,
        pairs=pairs,
        start=start,
        now=now,
        cron=None,
        interval_seconds=parse_duration(every, "--every"),
        timezone="UTC",
        catch_up="latest",
        max_catch_up=1,
        overlap=overlap,
        jitter_seconds=0,
        grace_seconds=0,
    )
    with open_store(db_from_context(ctx, db)) as store:
        data = add_monitor(store, base, monitor, now=now)
    output.current().success("Monitor", data, human=_human(data))


add_shared_commands(
    app,
    TimedGroup(
        noun="monitor",
        human=_human,
        name_help="The monitor.",
        list_help="List monitors with their last observation and firing.\n\n"
        "Example: agentctl monitor list --output json",
        show_help="Show a monitor, its recent observations and the runs its changes "
        "started.\n\nExample: agentctl monitor show docs-changed",
        show_limit=10,
        show_limit_help="Observations and firings shown.",
        pause_help="Stop observing (runs it started go on).\n\n"
        "Example: agentctl monitor pause docs-changed",
        resume_help="Observe again from the next interval.\n\n"
        "Example: agentctl monitor resume docs-changed",
        remove_help="Remove a monitor and its observations (the runs it started stay).\n\n"
        "Example: agentctl monitor remove docs-changed",
    ),
)
