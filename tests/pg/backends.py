"""Reading and poking a test database directly, whichever backend it is (a SQLite file or a
PostgreSQL URL): what an operator's SQL client or a second machine would do."""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["execute", "postgres_text", "rows"]


def postgres_text(statement: str) -> str:
    """A test's hand-written SQL (``?`` placeholders, as sqlite3 takes) for psycopg: each
    ``?`` outside quotes becomes ``%s``, and a ``%`` becomes ``%%``. The store itself sends
    only statements compiled for its dialect; this is the tests' own convenience."""
    out: list[str] = []
    quote: str | None = None
    for char in statement:
        if char == "%":
            out.append("%%")
        elif quote is not None:
            quote = None if char == quote else quote
            out.append(char)
        elif char in ("'", '"'):
            quote = char
            out.append(char)
        else:
            out.append("%s" if char == "?" else char)
    return "".join(out)


def rows(database: str, statement: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if "://" in database:
        import psycopg

        with psycopg.connect(database) as conn:
            return list(conn.execute(postgres_text(statement), parameters))
    with sqlite3.connect(database) as conn:
        found = conn.execute(statement, parameters).fetchall()
    conn.close()
    return found


def execute(database: str, statement: str, parameters: tuple[Any, ...] = ()) -> None:
    if "://" in database:
        import psycopg

        with psycopg.connect(database) as conn:
            conn.execute(postgres_text(statement), parameters)
        return
    with sqlite3.connect(database) as conn:
        conn.execute(statement, parameters)
    conn.close()
