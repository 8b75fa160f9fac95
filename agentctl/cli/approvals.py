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
    from agentctl.engine.approvals import list_approvals
    from agentctl.engine.records import load_run
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store, store.read() as conn:
        if run_id is not None:
            load_run(conn, run_id)
        found = [
            a.to_json() for a in list_approvals(conn, run_id, status=None if all_ else "pending")
        ]
    out = output.current()

    def human() -> None:
        if not found:
            print("no pending approvals", file=out.stdout)
        for item in found:
            extra = f" choices {item['choices']}" if item.get("choices") else ""
            print(
                f"{item['approvalId']}  {item['status']:<9} {item['kind']:<9} run "
                f"{item['runId']} task {item['taskId']}: {item['prompt']}{extra}",
                file=out.stdout,
            )

    out.success("ApprovalList", {"approvals": found}, human=human)


def _decide(
    ctx: typer.Context, approval_id: str, approve: bool, reason: str, actor: str, db: str | None
) -> None:
    from agentctl.engine.operations import decide_approval
    from agentctl.ids import SystemClock
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        data = decide_approval(
            store, approval_id, approve=approve, reason=reason, actor=actor, clock=SystemClock()
        )
    status = data["approval"]["status"]
    output.current().success(
        "ApprovalDecision", data, human=f"{approval_id} {status}" + next_lines(data["next"])
    )


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
    from agentctl.engine.operations import answer_question
    from agentctl.ids import SystemClock
    from agentctl.store.engine import open_store

    with open_store(db_from_context(ctx, db), create=False) as store:
        data = answer_question(store, approval_id, value, actor=actor, clock=SystemClock())
    output.current().success(
        "ApprovalDecision", data, human=f"{approval_id} answered" + next_lines(data["next"])
    )
