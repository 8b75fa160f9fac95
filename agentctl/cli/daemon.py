"""``agentctl daemon``: fire schedules and resume answered runs, in the foreground."""

from __future__ import annotations

import signal
import threading
from typing import Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context


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
    from agentctl.engine.core.faults import Faults
    from agentctl.engine.scheduled_runs import RunLauncher
    from agentctl.errors import UsageError
    from agentctl.ids import SystemClock
    from agentctl.scheduling.daemon import run_loop, tick
    from agentctl.scheduling.slots import parse_duration, parse_instant
    from agentctl.store.engine import open_store

    if now is not None and not once:
        raise UsageError("--now needs --once", hint="agentctl daemon --once --now TIME")
    poll_seconds = max(1, parse_duration(poll, "--poll"))
    fixed = parse_instant(now, "--now") if now is not None else None
    out = output.current()
    clock = SystemClock()
    faults = Faults()

    def events(kind: str, data: dict[str, Any], human: str) -> None:
        out.event(kind, data, human=human)

    with open_store(db_from_context(ctx, db)) as store:
        launcher = RunLauncher(store, clock)

        def reap(wait: bool = False) -> list[dict[str, Any]]:
            finished = launcher.reap(wait=wait)
            for item in finished:
                document = RunLauncher.last_outcome(item["log"]) or {}
                state = (document.get("data") or {}).get("state") or (
                    (document.get("error") or {}).get("code")
                )
                item["state"] = state
                events("RunExited", item, f"{item['runId']} exited {item['exitCode']} ({state})")
            return finished

        def reap_finished() -> None:
            reap()

        if once:
            report = tick(store, fixed or clock.now(), launcher, events=events, fault=faults.hit)
            finished = reap(wait=True)
            data = {**report.to_json(), "runs": finished}
            summary = (
                f"fired {len(report.fired)}, skipped {len(report.skipped)}, failed "
                f"{len(report.failed)}, resumed {len(report.resumed)}"
            )
            out.success("DaemonTick", data, human=summary)
            return 0
        stop = threading.Event()
        previous = {
            sig: signal.signal(sig, lambda *_: stop.set())
            for sig in (signal.SIGTERM, signal.SIGINT)
        }
        events("DaemonStarted", {"db": store.path, "pollSeconds": poll_seconds}, "daemon started")
        try:
            run_loop(
                store,
                clock.now,
                launcher,
                stop,
                poll_seconds=poll_seconds,
                events=events,
                fault=faults.hit,
                reap=reap_finished,
            )
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        running = sorted(launcher.children)
        out.success(
            "DaemonStopped",
            {"runsStillRunning": running},
            human="daemon stopped"
            + (f"; runs still running: {', '.join(running)}" if running else ""),
        )
        return 0
