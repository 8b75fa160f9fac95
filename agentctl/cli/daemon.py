"""``agentctl daemon``: fire schedules and resume answered runs, in the foreground."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context

if TYPE_CHECKING:
    from agentctl.runtime_scheduling import DaemonEvent


def daemon_command(
    ctx: typer.Context,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Do what is due now, wait for the runs it started, and exit (for a systemd "
            "timer or cron).",
        ),
    ] = False,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="With --once: act as if it were this ISO time (catching up on purpose, tests).",
        ),
    ] = None,
    poll: Annotated[
        str,
        typer.Option("--poll", help="Look for answered parked runs at least this often."),
    ] = "30s",
    db: DbOption = None,
) -> int:
    """Fire due schedule slots and resume parked runs whose approvals were answered.

    Each slot is committed as a firing (unique per schedule and slot) before its run is
    created: a slot never starts twice, even with two daemons or after a crash. Runs execute
    in child processes (logs/RUN.log beside the database). SIGTERM or SIGINT stops the
    daemon cleanly; the runs it started go on. Log lines are JSON with --output jsonl.

    Example: agentctl --output jsonl daemon

    Example: agentctl daemon --once --now 2026-03-29T01:30:00Z
    """
    from agentctl.runtime import Runtime

    out = output.current()

    def events(event: DaemonEvent) -> None:
        out.event(event.kind, event.data, human=event.summary)

    runtime = Runtime(db_from_context(ctx, db), handle_signals=True)
    report = runtime.daemon(once=once, now=now, poll=poll, events=events)
    out.success("DaemonTick" if once else "DaemonStopped", report.to_json(), human=report.summary)
    return 0
