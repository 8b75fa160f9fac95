"""``agentctl approvals list|approve|reject|answer``."""

from __future__ import annotations

from typing import Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.cli.output import next_lines

app = typer.Typer(name="approvals", no_args_is_help=True)

ActorOption = Annotated[str, typer.Option("--actor", help="Who decides.")]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why (kept in the audit log).")]
IdArgument = Annotated[str, typer.Argument(help="The approval id (approval-…).")]


@app.callback()
def _group(ctx: typer.Context, db: DbOption = None) -> None:
    """Approvals and questions that park runs.

    Example: agentctl approvals list
    """
    ctx.obj = {"db": db}


@app.command("list")
def list_command(
    ctx: typer.Context,
    run_id: Annotated[str | None, typer.Argument(help="Only this run's approvals.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include resolved ones.")] = False,
    db: DbOption = None,
) -> None:
    """List pending approvals and questions (all runs unless RUN_ID is given).

    Example: agentctl approvals list --all
    """
    from agentctl.runtime import Runtime

    found = Runtime(db_from_context(ctx, db)).approvals(run_id, include_resolved=all_)
    out = output.current()

    def human() -> None:
        if not found:
            print("no pending approvals", file=out.stdout)
        for item in found:
            extra = f" choices {item.choices}" if item.choices else ""
            print(
                f"{item.id}  {item.status:<9} {item.kind:<9} run "
                f"{item.run_id} task {item.task_id}: {item.prompt}{extra}",
                file=out.stdout,
            )

    out.success("ApprovalList", {"approvals": [a.to_json() for a in found]}, human=human)


def _decide(
    ctx: typer.Context, approval_id: str, approve: bool, reason: str, actor: str, db: str | None
) -> None:
    from agentctl.runtime import Runtime

    runtime = Runtime(db_from_context(ctx, db))
    decide = runtime.approve if approve else runtime.reject
    decided = decide(approval_id, reason=reason, actor=actor)
    status = decided.approval.status
    if decided.unchanged:
        said = f"{approval_id} already {status}; nothing changed"
    else:
        said = f"{approval_id} {status}"
    data = decided.to_json()
    output.current().success("ApprovalDecision", data, human=said + next_lines(data["next"]))


@app.command("approve")
def approve_command(
    ctx: typer.Context,
    approval_id: IdArgument,
    reason: ReasonOption,
    actor: ActorOption = "cli-user",
    db: DbOption = None,
) -> None:
    """Approve a gated effect; `agentctl resume RUN` then dispatches it.

    Example: agentctl approvals approve approval-ac3106d9aea9df72 --reason 'safe command'
    """
    _decide(ctx, approval_id, True, reason, actor, db)


@app.command("reject")
def reject_command(
    ctx: typer.Context,
    approval_id: IdArgument,
    reason: ReasonOption,
    actor: ActorOption = "cli-user",
    db: DbOption = None,
) -> None:
    """Reject a gated effect; on resume its task fails and the run is marked failed.

    Example: agentctl approvals reject approval-ac3106d9aea9df72 --reason 'not today'
    """
    _decide(ctx, approval_id, False, reason, actor, db)


@app.command("answer")
def answer_command(
    ctx: typer.Context,
    approval_id: IdArgument,
    value: Annotated[str, typer.Argument(help="The answer: parsed as JSON, else a string.")],
    actor: ActorOption = "cli-user",
    db: DbOption = None,
) -> None:
    """Answer a question (a builtin.ask task); the answer becomes the task's output.

    Example: agentctl approvals answer approval-16cf2f9ac1a51c29 '"staging"'
    """
    from agentctl.json_text import parse_json_text
    from agentctl.runtime import Runtime

    try:
        answer: object = parse_json_text(value)
    except ValueError:
        answer = value
    answered = Runtime(db_from_context(ctx, db)).answer(approval_id, answer, actor=actor)
    said = f"{approval_id} already answered; nothing changed" if answered.unchanged else None
    data = answered.to_json()
    output.current().success(
        "ApprovalDecision",
        data,
        human=(said or f"{approval_id} answered") + next_lines(data["next"]),
    )
