"""Option types shared by several command groups."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["DbOption", "db_from_context"]

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLite database file, or a postgresql://user@host/dbname URL "
        "(default: $AGENTCTL_DB, else .agentctl/runtime.db).",
        show_default=False,
    ),
]


def db_from_context(ctx: typer.Context, db: str | None) -> str:
    """The database for a command: its own --db, else its group's --db, else the default."""
    from agentctl.store.location import resolve_db_path

    chosen = db
    while chosen is None and ctx is not None:
        obj = ctx.obj if isinstance(ctx.obj, dict) else {}
        chosen = obj.get("db")
        ctx = ctx.parent  # type: ignore[assignment]
    return resolve_db_path(chosen)
