"""``agentctl workflows list`` and ``workflows show NAME``: the workflow registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, database_named, db_from_context

if TYPE_CHECKING:
    from agentctl.runtime import Runtime

app = typer.Typer(
    name="workflows",
    help="Workflows by name, from the project's workflow directories."
    "\n\nExample: agentctl workflows list",
    no_args_is_help=True,
)


@app.callback()
def _workflows_group(ctx: typer.Context, db: DbOption = None) -> None:
    """Workflows by name, from the project's workflow directories.

    The directories: $AGENTCTL_WORKFLOWS_PATH, else `workflows.paths` in
    .agentctl/config.yaml, else .agentctl/workflows and workflows under the current directory.
    """
    ctx.obj = {"db": db}


def _runtime(ctx: typer.Context, db: str | None) -> tuple[Runtime, bool]:
    """The database, and whether a missing one lists the workflows as never run. A database
    that was named (--db, AGENTCTL_DB) but is missing is an error (exit 5, nothing
    created): it is a typo. A project that has not run anything yet has no default
    database either; its workflows are listed as never run, so the list is there to find a
    name before the first `agentctl roll NAME`."""
    from agentctl.runtime import Runtime

    return Runtime(db_from_context(ctx, db)), not database_named(ctx, db)


@app.command("list")
def list_command(ctx: typer.Context, db: DbOption = None) -> None:
    """List the registered workflows: name, description, file, digest, last run and state.

    Example: agentctl workflows list --output json
    """
    runtime, missing_ok = _runtime(ctx, db)
    registry = runtime.workflows(missing_ok=missing_ok)
    found = [item.to_json() for item in registry.workflows]
    out = output.current()

    def human() -> None:
        if not found:
            dirs = ", ".join(str(d) for d in registry.search_path)
            print(f"no workflows in {dirs}", file=out.stdout)
        for item in found:
            last = item["lastRun"]
            ran = f"{last['runId']} {last['state']}" if last else "never run"
            digest = (item["digest"] or "-")[:19]
            print(f"{item['name']:<24} {digest:<19} {ran}  {item['file']}", file=out.stdout)
            if item["problem"]:
                print(f"  {item['problem']}", file=out.stdout)
            elif item["description"]:
                print(f"  {item['description']}", file=out.stdout)

    out.success("WorkflowList", {"workflows": found}, human=human)


@app.command("show")
def show_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A workflow name (metadata.name or file stem).")],
    db: DbOption = None,
) -> None:
    """Show one registered workflow: its file, digest, description and last run.

    Exit 2 when no workflow or several answer to NAME.

    Example: agentctl workflows show hello
    """
    runtime, missing_ok = _runtime(ctx, db)
    item = runtime.workflow(name, missing_ok=missing_ok).to_json()
    out = output.current()
    last = item["lastRun"]
    lines = [
        f"{item['name']}  {item['file']}",
        f"  description: {item['description'] or '-'}",
        f"  digest: {item['digest'] or '-'}",
        f"  last run: {last['runId'] + ' ' + last['state'] if last else 'never run'}",
    ]
    if item["problem"]:
        lines.append(f"  problem: {item['problem']}")
    out.success("Workflow", item, human="\n".join(lines))
