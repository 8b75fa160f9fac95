"""The typer application: the root command and its command groups.

Command modules import SQLAlchemy, Alembic and httpx only inside their functions, so
building this app (for ``--help`` or parsing) stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentctl.cli import db, meta

__all__ = ["app"]

app = typer.Typer(
    name="agentctl",
    help="Run AI-agent workflows durably: every effect is journaled before it is dispatched.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    output: Annotated[
        str,
        typer.Option(
            "--output",
            help="Output format: human, json or jsonl (accepted anywhere on the line).",
        ),
    ] = "human",
    color: Annotated[
        str,
        typer.Option(
            "--color", help="Colour: auto (terminals only; NO_COLOR honoured), always or never."
        ),
    ] = "auto",
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Human mode also prints the full data.")
    ] = False,
) -> None:
    """Run AI-agent workflows durably: every effect is journaled before it is dispatched."""


app.command("version")(meta.version_command)
app.command("completion")(meta.completion_command)
app.add_typer(db.app, name="db")
