"""``agentctl effects list|inspect|reconcile`` and the top-level ``reconcile``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.cli.output import next_lines

if TYPE_CHECKING:
    from agentctl.runtime_records import EffectRecord

app = typer.Typer(name="effects", no_args_is_help=True)

StatusOption = Annotated[str, typer.Option("--status", help="applied, not-applied or compensated.")]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why (kept in the audit log).")]
ActorOption = Annotated[str, typer.Option("--actor", help="Who concludes.")]
EvidenceOption = Annotated[
    str | None, typer.Option("--evidence-file", help="A text file of evidence to keep.")
]
ResultOption = Annotated[
    str | None,
    typer.Option("--result-file", help="JSON result the applied operation produced."),
]
ResultSchemaOption = Annotated[
    str | None,
    typer.Option("--result-schema-file", help="JSON Schema the result must satisfy."),
]
CompensationOption = Annotated[
    str | None,
    typer.Option("--compensation-effect", help="The effect that compensated this one."),
]
ApprovedOption = Annotated[
    bool,
    typer.Option(
        "--approved",
        help="Record the conclusion without asking. Without it, a terminal asks for "
        "confirmation; without a terminal (scripts, CI) the conclusion is recorded as given.",
    ),
]


def _confirm(effect: EffectRecord, status: str, reason: str) -> None:
    """Show the effect on the terminal and ask before recording; ``n`` records nothing."""
    from agentctl.errors import BlockedError

    typer.echo(
        f"effect {effect.id}\n  {effect.operation} ({effect.effect_class}), task "
        f"{effect.task_id} attempt {effect.attempt}, run {effect.run_id}, now "
        f"{effect.status}",
        err=True,
    )
    question = f"Record `{status}` for this effect (reason: {reason})?"
    if not typer.confirm(question, default=False, err=True):
        raise BlockedError(
            f"effect {effect.id} was not reconciled: the conclusion was not confirmed",
            code="reconcile.declined",
            hint="run the command again and answer y, or pass --approved",
        )


@app.callback()
def _group(ctx: typer.Context, db: DbOption = None) -> None:
    """The effect journal: list, inspect, reconcile.

    Example: agentctl effects list RUN
    """
    ctx.obj = {"db": db}


@app.command("list")
def list_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run whose effects to list.")],
    task: Annotated[str | None, typer.Option("--task", help="Only this task's effects.")] = None,
    db: DbOption = None,
) -> None:
    """List a run's effects in the order they were requested.

    Each effect carries the traceId/spanId of its span, as in `inspect` (null when
    telemetry was off for the run).

    Example: agentctl effects list RUN --output json
    """
    from agentctl import Runtime

    listed = Runtime(db_from_context(ctx, db)).effects(run_id, task=task)
    found = [effect.to_json() for effect in listed]
    out = output.current()

    def human() -> None:
        if not found:
            print("no effects", file=out.stdout)
        for effect in found:
            print(
                f"{effect['effectId']}  {effect['status']:<20} {effect['operation']}  "
                f"{effect['taskId']}#{effect['attempt']}",
                file=out.stdout,
            )

    out.success("EffectList", {"runId": run_id, "effects": found}, human=human)


@app.command("inspect")
def inspect_command(
    ctx: typer.Context,
    effect_id: Annotated[
        str, typer.Argument(help="Effect id (or a unique prefix of at least 8 hex).")
    ],
    db: DbOption = None,
) -> None:
    """Show one effect with its request, result and reconciliations (and the remote task
    an A2A peer returned for it); for a process, its command, exit code and the last lines
    of its stderr.

    Example: agentctl effects inspect EFFECT
    """
    from agentctl import Runtime
    from agentctl.cli.effect_view import render_effect

    data = Runtime(db_from_context(ctx, db)).effect(effect_id).to_json()
    output.current().success("Effect", data, human=render_effect(data))


def reconcile_command(
    ctx: typer.Context,
    effect_id: Annotated[str | None, typer.Argument(help="Effect to conclude.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="applied, not-applied or compensated.")
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept in the audit log).")
    ] = None,
    actor: ActorOption = "cli-user",
    evidence_file: EvidenceOption = None,
    result_file: ResultOption = None,
    result_schema_file: ResultSchemaOption = None,
    compensation_effect: CompensationOption = None,
    approved: ApprovedOption = False,
    list_: Annotated[
        bool,
        typer.Option(
            "--list",
            help="List effects that need a "
            "conclusion (optionally of one run: pass RUN_ID "
            "as the argument).",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Append an operator's conclusion to an uncertain effect, then `resume` the run.

    `applied` reuses the effect's result (validated with --result-schema-file when given);
    `not-applied` and `compensated` let resume start a fresh attempt. On a terminal the
    command asks before recording unless --approved is given.

    Example: agentctl reconcile EFFECT --status not-applied --reason 'job never started'
    --approved
    """
    from agentctl.errors import UsageError
    from agentctl.runtime import Runtime

    out = output.current()
    runtime = Runtime(db_from_context(ctx, db))
    if list_:
        found = runtime.needs_reconciliation(effect_id)

        def human() -> None:
            if not found:
                print("nothing needs reconciliation", file=out.stdout)
            for effect in found:
                print(
                    f"{effect.id}  {effect.status:<10} {effect.operation}  run {effect.run_id} "
                    f"task {effect.task_id}",
                    file=out.stdout,
                )

        out.success("EffectList", {"effects": [e.to_json() for e in found]}, human=human)
        return
    if effect_id is None or status is None or reason is None:
        raise UsageError(
            "reconcile needs EFFECT_ID, --status and --reason",
            hint="e.g. agentctl reconcile EFFECT --status applied --reason 'checked the "
            "file'; or agentctl reconcile --list",
        )
    if not approved and sys.stdin.isatty():
        _confirm(runtime.effect(effect_id).effect, status, reason)
    concluded = runtime.reconcile(
        effect_id,
        status,
        reason=reason,
        actor=actor,
        evidence_file=evidence_file,
        result_file=result_file,
        result_schema_file=result_schema_file,
        compensation_effect_id=compensation_effect,
    )
    data = concluded.to_json()
    out.success(
        "Reconciliation",
        data,
        human=f"{concluded.effect.id} reconciled {concluded.reconciliation.status}"
        + next_lines(data["next"]),
    )


@app.command("reconcile")
def effects_reconcile_command(
    ctx: typer.Context,
    effect_id: Annotated[str, typer.Argument(help="Effect to conclude.")],
    status: StatusOption,
    reason: ReasonOption,
    actor: ActorOption = "cli-user",
    evidence_file: EvidenceOption = None,
    result_file: ResultOption = None,
    result_schema_file: ResultSchemaOption = None,
    compensation_effect: CompensationOption = None,
    approved: ApprovedOption = False,
    db: DbOption = None,
) -> None:
    """Append an operator's conclusion to an effect (same as `agentctl reconcile`).

    Example: agentctl effects reconcile EFFECT --status applied --reason 'file is there'
    --approved
    """
    reconcile_command(
        ctx,
        effect_id,
        status,
        reason,
        actor,
        evidence_file,
        result_file,
        result_schema_file,
        compensation_effect,
        approved,
        False,
        db,
    )


@app.command("continue-remote")
def continue_remote_command(
    ctx: typer.Context,
    effect_id: Annotated[
        str, typer.Argument(help="The A2A delegation's effect id (or a unique prefix).")
    ],
    reason: ReasonOption,
    actor: ActorOption = "cli-user",
    approved: Annotated[
        bool,
        typer.Option(
            "--approved",
            help="Record the conclusion without asking. Without it, a terminal asks first; "
            "without a terminal (scripts, CI) it is recorded as observed.",
        ),
    ] = False,
    timeout_seconds: Annotated[
        float | None,
        typer.Option(
            "--timeout-seconds",
            help="How long to follow the remote task (default: the peer's timeoutSeconds, "
            "else 120).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Follow the A2A task a delegation's peer returned before its owner died, without
    sending the message again.

    When the peer reports the task finished, the effect is concluded `applied` with the
    task as its result (audited); `resume` then continues the run. A task still working
    exits 3 and records nothing; a failed one exits 4 and leaves the decision to you.

    Example: agentctl effects continue-remote EFFECT --reason 'owner died' --approved
    """
    from agentctl.runtime import Runtime

    out = output.current()
    runtime = Runtime(db_from_context(ctx, db))
    if not approved and sys.stdin.isatty():
        _confirm(
            runtime.effect(effect_id).effect, "applied (when the remote task finished)", reason
        )
    continued = runtime.continue_remote(
        effect_id, reason=reason, actor=actor, timeout_seconds=timeout_seconds
    )
    data = continued.to_json()
    remote = continued.remote_task
    out.success(
        "RemoteContinuation",
        data,
        human=f"{continued.effect.id} reconciled applied: A2A task {remote.task_id} "
        f"{remote.state}" + next_lines(data["next"]),
    )
