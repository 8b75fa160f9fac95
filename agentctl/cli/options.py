"""Option types shared by several command groups."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["DbOption", "VarOption", "VarsFileOption", "database_named", "db_from_context"]

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLite database file, or a postgresql://user@host/dbname URL "
        "(default: $AGENTCTL_DB, else .agentctl/runtime.db).",
        show_default=False,
    ),
]

VarOption = Annotated[
    list[str] | None,
    typer.Option(
        "--var",
        help="KEY=JSON variable for every task; wins over every other layer; repeatable "
        "(the last one wins). A string is JSON too: --var 'env=\"qa\"'.",
        show_default=False,
    ),
]
VarsFileOption = Annotated[
    list[str] | None,
    typer.Option(
        "--vars-file",
        help="YAML or JSON file of variables for every task (relative to the current "
        "directory); repeatable, later files win; --var wins over all of them.",
        show_default=False,
    ),
]


def db_from_context(ctx: typer.Context, db: str | None) -> str:
    """The database for a command: its own --db, else its group's --db, else the default."""
    from agentctl import hints
    from agentctl.runtime import Runtime

    chosen = db
    while chosen is None and ctx is not None:
        obj = ctx.obj if isinstance(ctx.obj, dict) else {}
        chosen = obj.get("db")
        ctx = ctx.parent  # type: ignore[assignment]
    path = Runtime.locate(chosen)
    # Commands suggested as next steps name the same database when it was given here.
    hints.use_database(path if chosen else None)
    return path


def database_named(ctx: typer.Context, db: str | None) -> bool:
    """Whether the user named a database (--db here or on the group, or AGENTCTL_DB) rather
    than leaving the default ``.agentctl/runtime.db``."""
    import os

    while db is None and ctx is not None:
        obj = ctx.obj if isinstance(ctx.obj, dict) else {}
        db = obj.get("db")
        ctx = ctx.parent  # type: ignore[assignment]
    return bool(db or os.environ.get("AGENTCTL_DB"))
