"""``agentctl monitor add|list|show|pause|resume|remove``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context

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
    input_pairs: Annotated[
        list[str] | None,
        typer.Option("--input", help="KEY=VALUE input of every run (JSON, else a string)."),
    ] = None,
    overlap: Annotated[
        str,
        typer.Option("--overlap", help="A change while the previous run is live: skip or allow."),
    ] = "skip",
    start: Annotated[
        str | None,
        typer.Option("--start", help="Observations come after this ISO time (default: now)."),
    ] = None,
    workspace: Annotated[
        str | None,
        typer.Option("--workspace", help="Base directory of the runs (default: the file's)."),
    ] = None,
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
    from pathlib import Path

    from agentctl.engine.run.creation import parse_input_pairs, prepare_run
    from agentctl.errors import UsageError
    from agentctl.scheduling.monitors import MonitorTarget, add_monitor
    from agentctl.scheduling.registry import resolve_workflow
    from agentctl.scheduling.schedules import NewSchedule
    from agentctl.scheduling.slots import parse_duration, parse_instant
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
    base = NewSchedule(
        name=name,
        workflow=workflow,
        workflow_file=prepared.workflow_file,
        project_dir=str(Path.cwd().resolve()),
        workspace=str(Path(workspace).resolve()) if workspace else None,
        cron=None,
        interval_seconds=parse_duration(every, "--every"),
        timezone="UTC",
        # Read as the run will read them (a declared string keeps its text).
        inputs={name: prepared.inputs[name] for name in parse_input_pairs(pairs)},
        catch_up="latest",
        max_catch_up=1,
        overlap=overlap,
        jitter_seconds=0,
        grace_seconds=0,
        start=parse_instant(start, "--start") if start else now,
    )
    with open_store(db_from_context(ctx, db)) as store:
        data = add_monitor(store, base, monitor, now=now)
    output.current().success("Monitor", data, human=_human(data))


@app.command("list")
def list_command(ctx: typer.Context, db: DbOption = None) -> None:
    """List monitors with their last observation and firing.

    Example: agentctl monitor list --output json
    """
    from agentctl.scheduling.monitors import list_monitors
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        found = list_monitors(store, now=_now())
    text = "\n".join(_human(item) for item in found) or "no monitors"
    output.current().success("MonitorList", {"monitors": found}, human=text)


@app.command("show")
def show_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The monitor.")],
    limit: Annotated[
        int, typer.Option("--limit", help="Observations and firings shown.", min=1)
    ] = 10,
    db: DbOption = None,
) -> None:
    """Show a monitor, its recent observations and the runs its changes started.

    Example: agentctl monitor show docs-changed
    """
    from agentctl.scheduling.monitors import get_monitor
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        data = get_monitor(store, name, now=_now(), observations=limit)
    output.current().success("Monitor", data, human=_human(data))


def _set_paused(ctx: typer.Context, db: str | None, name: str, paused: bool) -> None:
    from agentctl.scheduling.monitors import get_monitor
    from agentctl.scheduling.schedules import set_paused
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        set_paused(store, name, paused, now=_now(), monitor=True)
        data = get_monitor(store, name, now=_now())
    output.current().success("Monitor", data, human=_human(data))


@app.command("pause")
def pause_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The monitor.")],
    db: DbOption = None,
) -> None:
    """Stop observing (runs it started go on).

    Example: agentctl monitor pause docs-changed
    """
    _set_paused(ctx, db, name, True)


@app.command("resume")
def resume_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The monitor.")],
    db: DbOption = None,
) -> None:
    """Observe again from the next interval.

    Example: agentctl monitor resume docs-changed
    """
    _set_paused(ctx, db, name, False)


@app.command("remove")
def remove_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The monitor.")],
    db: DbOption = None,
) -> None:
    """Remove a monitor and its observations (the runs it started stay).

    Example: agentctl monitor remove docs-changed
    """
    from agentctl.scheduling.schedules import remove_schedule
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        data = remove_schedule(store, name, monitor=True)
    output.current().success("MonitorRemoved", data, human=f"removed monitor {name}")
