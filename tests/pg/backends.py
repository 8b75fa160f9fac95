"""Reading and poking a test database directly, whichever backend it is (a SQLite file or a
PostgreSQL URL): what an operator's SQL client or a second machine would do."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentctl.store.dialect import to_postgres

__all__ = ["execute", "rows"]


def rows(database: str, statement: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if "://" in database:
        import psycopg

        with psycopg.connect(database) as conn:
            return list(conn.execute(to_postgres(statement, bool(parameters)), parameters or None))
    with sqlite3.connect(database) as conn:
        found = conn.execute(statement, parameters).fetchall()
    conn.close()
    return found


def execute(database: str, statement: str, parameters: tuple[Any, ...] = ()) -> None:
    if "://" in database:
        import psycopg

        with psycopg.connect(database) as conn:
            conn.execute(to_postgres(statement, bool(parameters)), parameters or None)
        return
    with sqlite3.connect(database) as conn:
        conn.execute(statement, parameters)
    conn.close()
