"""The store's two SQL dialects: SQLite (the embedded default) and PostgreSQL.

Repositories write their statements with SQLAlchemy Core (:mod:`agentctl.store.statements`),
compiled once per dialect; what the two spell differently and the compiler does not
decide is a method of the dialect's member of the pair below (:class:`SqliteSql`,
:class:`PostgresqlSql`): how a transaction begins, an ``INSERT`` that leaves an existing
row alone, the dialect's own ``INSERT`` for an upsert, whether a commit wakes listeners.

Statements not yet moved to Core are still written in SQLite's spelling with ``?``
placeholders; on PostgreSQL they pass through :func:`to_postgres` (the engine hooks it in
for SQLAlchemy connections, :class:`~agentctl.store.engine.DriverSession` calls it
itself), which rewrites what differs mechanically:

- ``?`` placeholders become psycopg's ``%s`` (and a literal ``%`` becomes ``%%`` when the
  statement has parameters); text inside quotes is left alone;
- ``INSERT OR IGNORE INTO …`` becomes ``INSERT INTO … ON CONFLICT DO NOTHING``;
- a unary ``+`` before a column (SQLite's way of steering the planner off an index) is
  dropped: PostgreSQL has no unary plus on text.

A compiled statement's text is never rewritten (``statements.is_compiled``). What cannot
be rewritten mechanically is still chosen by such a repository with :func:`is_postgres`:
the long-term memory text index (FTS5 on SQLite, a ``tsvector`` expression index on
PostgreSQL), metadata filters (SQLite's ``->`` on text, PostgreSQL's on ``json``), and the
PRAGMA-based checks and statistics, which are SQLite's alone.

How a transaction begins differs too, and is one table here (:func:`begin_statement`). A
SQLite write transaction begins ``IMMEDIATE`` (the database's one write lock); a PostgreSQL
write transaction takes the advisory locks of its scope first (:mod:`agentctl.store.locks`:
the run it concerns, or the whole store), so every read-then-write of a repository (guarded
transitions, the fencing check, the audit chain, claims) keeps the guarantee it has on
SQLite while writes of different runs do not wait for each other. Reads see one snapshot
(``REPEATABLE READ``). The workers' task claims and claim outcomes are exact under
PostgreSQL's row locks alone, so they take no advisory lock (``Store.row_write``).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import locks

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.engine import Dialect
    from sqlalchemy.sql.dml import Insert

__all__ = [
    "POSTGRESQL",
    "POSTGRESQL_SQL",
    "READ",
    "ROW_LOCKS",
    "SQLITE",
    "SQLITE_SQL",
    "WRITE",
    "PostgresqlSql",
    "SqlDialect",
    "SqliteSql",
    "begin_statement",
    "dialect_name",
    "is_postgres",
    "sql_dialect",
    "to_postgres",
]

SQLITE = "sqlite"
POSTGRESQL = "postgresql"

#: The kinds of transaction: a write holding the locks of its scope (``Store.write``,
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
    # Unscoped: the whole store. A scoped write's BEGIN is locks.begin_postgres's.
    (POSTGRESQL, WRITE): locks.begin_postgres(None),
    (POSTGRESQL, READ): "BEGIN ISOLATION LEVEL REPEATABLE READ",
    (POSTGRESQL, ROW_LOCKS): "BEGIN",  # READ COMMITTED, no write lock
}


def begin_statement(dialect: str, kind: str, scope: locks.Locks | None = None) -> str:
    """The statement a ``kind`` transaction (:data:`WRITE`, :data:`READ`,
    :data:`ROW_LOCKS`) begins with on ``dialect``; a PostgreSQL write takes the locks of
    its ``scope`` (None: the whole store). One simple query, one round trip."""
    if scope is not None and (dialect, kind) == (POSTGRESQL, WRITE):
        return locks.begin_postgres(scope)
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


class SqlDialect(ABC):
    """What differs between the two dialects, for the repositories' statements
    (:mod:`agentctl.store.statements` builds each statement with the pair member of the
    dialect it compiles for). One subclass per dialect; nothing else branches on the name.
    """

    name: str

    @abstractmethod
    def compiler(self) -> Dialect:
        """The SQLAlchemy dialect statements are compiled with."""
        ...

    def begin(self, kind: str, scope: locks.Locks | None = None) -> str:
        """The statement a ``kind`` transaction begins with (see :func:`begin_statement`)."""
        return begin_statement(self.name, kind, scope)

    @abstractmethod
    def insert_ignoring(self, table: Table) -> Insert:
        """``INSERT`` into ``table`` that leaves an existing row (same key) as it is."""
        ...

    @abstractmethod
    def insert(self, table: Table) -> Any:
        """The dialect's own ``INSERT`` into ``table``: with its ``on_conflict_do_update``
        (an upsert: both dialects spell it ``ON CONFLICT … DO UPDATE``)."""
        ...

    #: Whether a committed change can wake listeners (PostgreSQL's ``NOTIFY``); on SQLite
    #: waiters look again after a short sleep.
    notifies: bool = False

    #: Whether writes serialise on advisory locks (:mod:`agentctl.store.locks`), which a
    #: write can also try to take without waiting; SQLite has one writer and none.
    advisory_locks: bool = False


class SqliteSql(SqlDialect):
    name = SQLITE

    def compiler(self) -> Dialect:
        from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

        return SQLiteDialect_pysqlite()

    def insert_ignoring(self, table: Table) -> Insert:
        from sqlalchemy import insert

        return insert(table).prefix_with("OR IGNORE")

    def insert(self, table: Table) -> Any:
        from sqlalchemy.dialects.sqlite import insert

        return insert(table)


class PostgresqlSql(SqlDialect):
    name = POSTGRESQL
    notifies = True
    advisory_locks = True

    def compiler(self) -> Dialect:
        from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
        from sqlalchemy.engine.interfaces import BindTyping

        # Positional ``%s`` as the driver-level SQL has always used, and no ``::TYPE``
        # casts on parameters: the repositories pass the values the columns store.
        found = PGDialect_psycopg(paramstyle="format")  # type: ignore[no-untyped-call]
        found.bind_typing = BindTyping.NONE
        return found

    def insert_ignoring(self, table: Table) -> Insert:
        from sqlalchemy.dialects.postgresql import insert

        return insert(table).on_conflict_do_nothing()

    def insert(self, table: Table) -> Any:
        from sqlalchemy.dialects.postgresql import insert

        return insert(table)


SQLITE_SQL = SqliteSql()
POSTGRESQL_SQL = PostgresqlSql()
_PAIR = {SQLITE: SQLITE_SQL, POSTGRESQL: POSTGRESQL_SQL}


def sql_dialect(name: str) -> SqlDialect:
    """The pair member named ``name`` (``sqlite`` or ``postgresql``)."""
    try:
        return _PAIR[name]
    except KeyError:
        raise ValueError(f"agentctl has no statements for the {name!r} dialect") from None
