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


def _human(data: dict[str, Any]) -> str:
    state = "paused" if data["paused"] else f"every {data['everySeconds']}s"
    lines = [f"{data['name']}  {data['workflow']}  {data['kind']} {data['target']}  {state}"]
    for observation in data["observations"]:
        lines.append(f"  {observation['slot']} {observation['outcome']:<9} {observation['value']}")
    for firing in data["firings"]:
        why = f" ({firing['reason']})" if firing["reason"] else ""
        lines.append(f"  fired {firing['slot']} {firing['state']} {firing['runId'] or '-'}{why}")
    return "\n".join(lines)


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
    from agentctl.runtime import Runtime

    added = Runtime(db_from_context(ctx, db)).add_monitor(
        name,
        workflow,
        watch_files=watch_files or [],
        http=http,
        expect_status=expect_status,
        command=command,
        every=every,
        debounce=debounce,
        input_pairs=input_pairs or [],
        overlap=overlap,
        start=start,
        workspace=workspace,
    )
    data = added.to_json()
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
