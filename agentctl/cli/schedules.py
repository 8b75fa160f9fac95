"""``agentctl schedule add|list|show|pause|resume|remove|trigger``."""

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
    name="schedule",
    help="Start runs by themselves: cron expressions in a time zone, or intervals "
    "(fired by `agentctl daemon`)."
    "\n\nExample: agentctl schedule list",
    no_args_is_help=True,
)


@app.callback()
def _schedule_group(ctx: typer.Context, db: DbOption = None) -> None:
    """Start runs by themselves: cron expressions in a time zone, or intervals.

    `agentctl daemon` fires the slots; see docs/schedules.md.
    """
    ctx.obj = {"db": db}


def _human(data: dict[str, Any]) -> str:
    rule = (
        f"cron {data['cron']!r} in {data['timezone']}"
        if data["cron"]
        else (f"every {data['everySeconds']}s")
    )
    state = "paused" if data["paused"] else f"next {data['nextDue'] or 'never'}"
    lines = [f"{data['name']}  {data['workflow']}  {rule}  {state}"]
    lines.append(
        f"  catch-up {data['catchUp']}, overlap {data['overlap']}, jitter "
        f"{data['jitterSeconds']}s, missed {data['missed']}"
    )
    for firing in data["firings"]:
        run = firing["runId"] or "-"
        why = f" ({firing['reason']})" if firing["reason"] else ""
        lines.append(f"  {firing['slot']} {firing['trigger']:<8} {firing['state']:<8} {run}{why}")
    return "\n".join(lines)


@app.command("add")
def add_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The schedule's name.")],
    workflow: Annotated[str, typer.Argument(help="A registered workflow name or a workflow file.")],
    cron: Annotated[
        str | None,
        typer.Option("--cron", help='Five-field cron expression, e.g. "0 2 * * *".'),
    ] = None,
    every: Annotated[
        str | None, typer.Option("--every", help="Fixed interval instead of cron: 90s, 10m, 1h.")
    ] = None,
    timezone: Annotated[
        str, typer.Option("--timezone", help="IANA time zone of the cron fields.")
    ] = "UTC",
    input_pairs: InputPairsOption = None,
    catch_up: Annotated[
        str,
        typer.Option(
            "--catch-up",
            help="Slots missed while no daemon ran: latest (fire the newest), all (fire them, "
            "at most --max-catch-up) or skip (fire none; alias none).",
        ),
    ] = "latest",
    max_catch_up: Annotated[
        int, typer.Option("--max-catch-up", help="With --catch-up all: at most N slots.", min=1)
    ] = 10,
    overlap: Annotated[
        str,
        typer.Option(
            "--overlap",
            help="When the previous run is still running or parked: skip the slot, queue it "
            "until that run ends, or allow a second run.",
        ),
    ] = "skip",
    jitter: Annotated[
        str, typer.Option("--jitter", help="Delay each slot by up to this much (e.g. 60s).")
    ] = "0s",
    grace: Annotated[
        str,
        typer.Option("--grace", help="With --catch-up skip: how late a slot still counts."),
    ] = "60s",
    start: Annotated[
        str | None,
        typer.Option("--start", help="First slots come after this ISO time (default: now)."),
    ] = None,
    workspace: WorkspaceOption = None,
    db: DbOption = None,
) -> None:
    """Add a schedule. The workflow is resolved and compiled now (exit 2 when broken) and
    again at every slot.

    Example: agentctl schedule add nightly-review review --cron "0 2 * * *" --timezone Europe/Paris

    Example: agentctl schedule add poll-queue triage --every 10m
    """
    from agentctl.runtime import Runtime

    added = Runtime(db_from_context(ctx, db)).add_schedule(
        name,
        workflow,
        cron=cron,
        every=every,
        timezone=timezone,
        input_pairs=input_pairs or [],
        catch_up=catch_up,
        max_catch_up=max_catch_up,
        overlap=overlap,
        jitter=jitter,
        grace=grace,
        start=start,
        workspace=workspace,
    )
    data = added.to_json()
    output.current().success("Schedule", data, human=_human(data))


add_shared_commands(
    app,
    TimedGroup(
        noun="schedule",
        human=_human,
        name_help="The schedule.",
        list_help="List schedules with their next due time and last firing.\n\n"
        "Example: agentctl schedule list --output json",
        show_help="Show a schedule and its recent firings (slot, state, run).\n\n"
        "Example: agentctl schedule show nightly-review",
        show_limit=20,
        show_limit_help="Firings shown, newest first.",
        pause_help="Stop firing a schedule (runs it started go on).\n\n"
        "Example: agentctl schedule pause nightly-review",
        resume_help="Fire a paused schedule again, from its next slot (slots passed while "
        "paused are\ncounted as missed, not fired).\n\n"
        "Example: agentctl schedule resume nightly-review",
        remove_help="Remove a schedule and its firing records (the runs it started stay).\n\n"
        "Example: agentctl schedule remove nightly-review",
    ),
)


@app.command("trigger")
def trigger_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The schedule.")],
    db: DbOption = None,
) -> int:
    """Fire a schedule now, in the foreground, as a manual firing (overlap not applied).

    Exit codes as `agentctl roll`: 0 succeeded, 3 parked, 4 failed, 130 cancelled.

    Example: agentctl schedule trigger nightly-review
    """
    from agentctl.cli.running import drive_and_report
    from agentctl.runtime import Runtime

    path = db_from_context(ctx, db)
    run_id = Runtime(path).trigger_schedule(name)
    output.current().event(
        "RunEvent",
        {"runId": run_id, "state": "running", "schedule": name},
        human=f"{run_id} running (schedule {name}, manual)",
    )
    return drive_and_report(path, run_id)
