"""``agentctl worker`` and ``agentctl runs wait``: runs executed by workers (PostgreSQL)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.errors import EXIT_BLOCKED, EXIT_CANCELLED, EXIT_OK, EXIT_RUN_FAILED

__all__ = ["runs_wait_command", "worker_command"]

_EXIT_BY_STATE = {
    "succeeded": EXIT_OK,
    "paused": EXIT_BLOCKED,
    "cancelled": EXIT_CANCELLED,
    "failed": EXIT_RUN_FAILED,
}


def worker_command(
    ctx: typer.Context,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency", help="Runs driven, and tasks executed, at the same time.", min=1
        ),
    ] = 4,
    name: Annotated[
        str | None,
        typer.Option("--name", help="This worker's name in events and the audit log."),
    ] = None,
    recover_interrupted: Annotated[
        bool,
        typer.Option(
            "--recover-interrupted",
            help="Also take over runs whose driving process died (after its lease), as "
            "`agentctl resume` would; effects it left in doubt still park the run.",
        ),
    ] = False,
    db: DbOption = None,
) -> int:
    """Execute runs released to workers: `roll --detach`, and parked runs whose approval
    or answer arrived; with --recover-interrupted, also runs whose owner died.

    A run whose driving process (a `roll`, another worker) died is left for an operator
    by default, as the daemon and the dashboard leave it: `agentctl resume RUN` continues
    it. With --recover-interrupted the worker takes such runs over once their lease
    (AGENTCTL_LEASE_SECONDS) ran out; an effect the dead owner left in doubt becomes
    uncertain and parks the run, never re-dispatched.

    Needs a PostgreSQL database (--db or AGENTCTL_DB). Start as many workers as you like, on
    as many hosts as share the database and the artifact root; each claims runs with
    SELECT … FOR UPDATE SKIP LOCKED and a fencing token, and drives them exactly as
    `agentctl resume` would; the tasks of a parallel batch are claimed the same way by any
    worker with a free slot (--concurrency counts runs and tasks separately). Idle, it
    waits for a notification (LISTEN/NOTIFY) and looks for work about once a second.
    SIGTERM or Ctrl-C drains: no new claims; the runs and tasks in hand finish or park;
    exit 0. Events are printed one per line (`--output jsonl`).

    Example: agentctl worker --concurrency 8 --name w1 --db postgresql://agentctl@db/agentctl

    Example: agentctl worker --recover-interrupted --db postgresql://agentctl@db/agentctl
    """
    import socket

    from agentctl.runtime import Runtime

    out = output.current()

    def emit(kind: str, data: dict[str, object]) -> None:
        run = f" {data['runId']}" if "runId" in data else ""
        human = f"worker {data['worker']}{run} {data['state']}"
        if "message" in data:
            human += f": {data['message']}"
        out.event(kind, dict(data), human=human)

    chosen = name or f"{socket.gethostname()}-{os.getpid()}"
    runtime = Runtime(db_from_context(ctx, db), on_event=emit, handle_signals=True)
    report = runtime.serve(
        name=chosen, concurrency=concurrency, recover_interrupted=recover_interrupted
    )
    out.success(
        "WorkerReport",
        {"worker": report.name, "runs": report.runs},
        human=f"worker {report.name} stopped after {len(report.runs)} run(s)",
    )
    return EXIT_OK


def runs_wait_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to wait for.")],
    db: DbOption = None,
) -> int:
    """Block until a run finishes or parks; the exit code is its state.

    0 succeeded, 3 paused (an approval, a question, an uncertain effect or a pause step
    needs a person), 4 failed, 130 cancelled. On PostgreSQL a notification wakes the
    wait at once; on SQLite the run is looked at twice a second.

    Example: agentctl runs wait run-01a2… --db postgresql://agentctl@db/agentctl
    """
    from agentctl.runtime import Runtime

    state = Runtime(db_from_context(ctx, db)).wait(run_id)
    output.current().success(
        "RunState", {"runId": run_id, "state": state}, human=f"{run_id} {state}"
    )
    return _EXIT_BY_STATE[state]
