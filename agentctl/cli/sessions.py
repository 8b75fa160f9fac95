"""``agentctl sessions list|show``: the provider sessions agent tasks recorded."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context

__all__ = ["app"]

app = typer.Typer(
    name="sessions",
    help="Provider sessions of agent tasks (transcripts a later run can continue): list, show."
    "\n\nExample: agentctl sessions list --name reviewer-main",
    no_args_is_help=True,
)


@app.callback()
def _group(ctx: typer.Context, db: DbOption = None) -> None:
    """Provider sessions of agent tasks (transcripts a later run can continue): list, show."""
    ctx.obj = {"db": db}


def _origin(session: dict[str, Any]) -> str:
    source = session["state"].get("continuedFrom")
    if source:
        return f"continues {source['runId']} {source['taskId']}"
    return "new session"


@app.command("list")
def list_command(
    ctx: typer.Context,
    run: Annotated[str | None, typer.Option("--run", help="Only this run's sessions.")] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Only sessions saved under this name.")
    ] = None,
    db: DbOption = None,
) -> None:
    """List recorded provider sessions, newest first: run, task, name, provider, turns and
    where each one continued from.

    Example: agentctl sessions list --name reviewer-main
    """
    from agentctl import Runtime

    listed = Runtime(db_from_context(ctx, db)).sessions(run_id=run, name=name)
    found = [session.to_json() for session in listed]
    out = output.current()

    def human() -> None:
        if not found:
            print("no sessions", file=out.stdout)
        for session in found:
            label = f" [{session['name']}]" if session["name"] else ""
            print(
                f"{session['runId']} {session['taskId']}{label}  {session['provider']}  "
                f"{session['state'].get('messages', '?')} message(s)  {_origin(session)}  "
                f"{session['updatedAt']}",
                file=out.stdout,
            )

    out.success("SessionList", {"sessions": found}, human=human)


@app.command("show")
def show_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run.")],
    task_id: Annotated[str, typer.Argument(help="The agent task.")],
    db: DbOption = None,
) -> None:
    """Show one session: its state and the transcript a later run would continue.

    Example: agentctl sessions show RUN review
    """
    from agentctl import Runtime

    session = Runtime(db_from_context(ctx, db)).session(run_id, task_id).to_json()
    out = output.current()

    def human() -> None:
        label = f" [{session['name']}]" if session["name"] else ""
        print(
            f"{session['runId']} {session['taskId']}{label}  {session['provider']}  "
            f"{_origin(session)}",
            file=out.stdout,
        )
        for message in session.get("transcript") or []:
            text = message.get("text")
            if message.get("toolCalls"):
                calls = ", ".join(call.get("name", "?") for call in message["toolCalls"])
                text = f"{text or ''} [tool calls: {calls}]".strip()
            elif message.get("toolResult") is not None:
                text = f"[tool result for {message.get('toolCallId')}]"
            print(f"  {message['role']}: {text}", file=out.stdout)

    out.success("Session", session, human=human)
