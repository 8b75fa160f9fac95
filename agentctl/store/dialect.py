"""The store's two SQL dialects: SQLite (the embedded default) and PostgreSQL.

Repositories write one statement per query in SQLite's spelling with ``?`` placeholders.
On PostgreSQL every driver-level statement passes through :func:`to_postgres` (the engine
hooks it in for SQLAlchemy connections, :class:`~agentctl.store.engine.DriverSession` calls
it itself), which rewrites what differs mechanically:

- ``?`` placeholders become psycopg's ``%s`` (and a literal ``%`` becomes ``%%`` when the
  statement has parameters); text inside quotes is left alone;
- ``INSERT OR IGNORE INTO …`` becomes ``INSERT INTO … ON CONFLICT DO NOTHING``;
- a unary ``+`` before a column (SQLite's way of steering the planner off an index) is
  dropped: PostgreSQL has no unary plus on text.

What cannot be rewritten mechanically is chosen by the repository itself with
:func:`is_postgres`: the long-term memory text index (FTS5 on SQLite, a ``tsvector``
expression index on PostgreSQL), metadata filters (SQLite's ``->`` on text, PostgreSQL's on
``json``), and the PRAGMA-based checks and statistics, which are SQLite's alone.

How a transaction begins differs too, and is one table here (:func:`begin_statement`). A
SQLite write transaction begins ``IMMEDIATE`` (the database's one write lock); a PostgreSQL
write transaction takes one transaction-scoped advisory lock first, so writers are
serialised exactly as on SQLite and every read-then-write of a repository (guarded
transitions, the fencing check, claims) keeps the guarantee it has there. Reads see one
snapshot (``REPEATABLE READ``). The workers' task claims and claim outcomes are the
exception: each is one statement exact under PostgreSQL's row locks, so they run without
the write lock (``Store.row_write``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

__all__ = [
    "POSTGRESQL",
    "READ",
    "ROW_LOCKS",
    "SQLITE",
    "WRITE",
    "WRITE_LOCK_KEY",
    "begin_statement",
    "dialect_name",
    "is_postgres",
    "to_postgres",
]

SQLITE = "sqlite"
POSTGRESQL = "postgresql"

#: The advisory lock every PostgreSQL write transaction holds (an arbitrary constant that
#: spells "agentctl" in ASCII, so an operator can recognise it in ``pg_locks``).
WRITE_LOCK_KEY = 0x6167656E7463746C

#: The kinds of transaction: a write holding the store's write lock (``Store.write``,
#: ``DriverSession.write``), a read of one snapshot (``read``), and a write decided by row
#: locks alone (``Store.row_write``, the workers' claims).
WRITE, READ, ROW_LOCKS = "write", "read", "row_locks"

#: How each kind of transaction begins, per dialect: the one table every begin hook and
#: :class:`~agentctl.store.engine.DriverSession` reads. On SQLite one writer at a time
#: holds the database anyway, so a row-lock write is an ordinary one.
_BEGIN = {
    (SQLITE, WRITE): "BEGIN IMMEDIATE",
    (SQLITE, READ): "BEGIN",
    (SQLITE, ROW_LOCKS): "BEGIN IMMEDIATE",
    # One simple query, one round trip (the key is a constant integer).
    (POSTGRESQL, WRITE): f"BEGIN; SELECT pg_advisory_xact_lock({int(WRITE_LOCK_KEY)})",
    (POSTGRESQL, READ): "BEGIN ISOLATION LEVEL REPEATABLE READ",
    (POSTGRESQL, ROW_LOCKS): "BEGIN",  # READ COMMITTED, no write lock
}


def begin_statement(dialect: str, kind: str) -> str:
    """The statement a ``kind`` transaction (:data:`WRITE`, :data:`READ`,
    :data:`ROW_LOCKS`) begins with on ``dialect``."""
    return _BEGIN[(dialect, kind)]


_INSERT_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_UNARY_PLUS = re.compile(r"(?<=[\s(=,])\+(?=[A-Za-z_])")


def dialect_name(conn: Any) -> str:
    """``sqlite`` or ``postgresql`` for a SQLAlchemy Connection or a DriverSession."""
    return str(conn.dialect.name)


def is_postgres(conn: Any) -> bool:
    return dialect_name(conn) == POSTGRESQL


@lru_cache(maxsize=4096)
def to_postgres(statement: str, has_parameters: bool) -> str:
    """``statement`` (SQLite spelling, ``?`` placeholders) in PostgreSQL's spelling."""
    out: list[str] = []
    quote: str | None = None
    for char in statement:
        if quote is not None:
            if char == quote:
                quote = None
            out.append("%%" if char == "%" and has_parameters else char)
            continue
        if char in ("'", '"'):
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        elif char == "%" and has_parameters:
            out.append("%%")
        else:
            out.append(char)
    text = _UNARY_PLUS.sub("", "".join(out))
    if _INSERT_OR_IGNORE.match(text):
        text = _INSERT_OR_IGNORE.sub("INSERT INTO", text, count=1).rstrip().rstrip(";")
        text += " ON CONFLICT DO NOTHING"
    return text
