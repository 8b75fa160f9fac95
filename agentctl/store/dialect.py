"""The store's two SQL dialects: SQLite (the embedded default) and PostgreSQL.

Repositories write their statements with SQLAlchemy Core (:mod:`agentctl.store.statements`),
compiled once per dialect; what the two spell differently and the compiler does not
decide is a method of the dialect's member of the pair below (:class:`SqliteSql`,
:class:`PostgresqlSql`): how a transaction begins, an ``INSERT`` that leaves an existing
row alone, the dialect's own ``INSERT`` for an upsert, whether a commit wakes listeners and
whether writes take advisory locks, a condition kept off an index (SQLite's unary ``+``),
a JSON member's text (SQLite's ``->`` on text, PostgreSQL's on ``json``), the long-term
memory text index (FTS5 on SQLite, a ``tsvector`` expression index on PostgreSQL), and the
storage settings ``db stats`` reports. Nothing else branches on the dialect's name.

Every statement a repository sends is compiled for the store's dialect; what is still
written as text is the same on both (``SELECT 1``) or comes from this pair (a ``BEGIN``,
the text index rebuild), and SQLite's ``PRAGMA``s run on SQLite-only paths.

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

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from agentctl.store import locks

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy import FromClause, Table
    from sqlalchemy.engine import Dialect
    from sqlalchemy.sql.dml import Insert, Update
    from sqlalchemy.sql.elements import ColumnElement
    from sqlalchemy.sql.expression import Executable

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
    "begin_steps",
    "dialect_name",
    "sql_dialect",
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


def begin_steps(kind: str, scope: locks.Locks | None = None) -> tuple[locks.Step, ...]:
    """A PostgreSQL ``kind`` transaction's :func:`begin_statement` as separate statements,
    which a driver session sends in one pipelined round trip (store/pg_statements.py): a
    write's ``BEGIN`` and each of its locks, each lock statement prepared once per
    connection; a read or a row-lock write its one ``BEGIN``."""
    if kind == WRITE:
        return locks.begin_steps(scope)
    return ((_BEGIN[(POSTGRESQL, kind)], None),)


def dialect_name(conn: Any) -> str:
    """``sqlite`` or ``postgresql`` for a SQLAlchemy Connection or a DriverSession."""
    return str(conn.dialect.name)


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

    @abstractmethod
    def unindexed(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        """``column`` for a condition the planner must not answer from an index on it (a
        filter of rows another condition selected already)."""
        ...

    @abstractmethod
    def json_member(self, document: ColumnElement[Any], name: Any) -> ColumnElement[Any]:
        """The member of ``document`` (JSON text) that the parameter ``name`` names, as the
        JSON text it is stored as (``name`` takes :meth:`json_member_name`'s value)."""
        ...

    @abstractmethod
    def json_member_name(self, key: str) -> str:
        """The value of :meth:`json_member`'s ``name`` parameter for the member ``key``."""
        ...

    @abstractmethod
    def memory_text_query(
        self, expression: str, terms: Sequence[str], phrases: Sequence[Sequence[str]]
    ) -> str | None:
        """The long-term memory text index's query for an FTS5 ``expression`` whose quoted
        ``terms`` are given, or any of the sealed index's token ``phrases``; None: it can
        match nothing."""
        ...

    @abstractmethod
    def memory_text_search(
        self, entries: FromClause, query: Any
    ) -> tuple[FromClause, ColumnElement[bool], ColumnElement[Any]]:
        """Searching ``entries`` (``memory_entries`` or an alias) by the text index:
        what to select from, the condition that the ``query`` parameter (a
        :meth:`memory_text_query`) matches, and the score (higher is better)."""
        ...

    @abstractmethod
    def rebuild_memory_text_index(self) -> Executable:
        """The statement that rebuilds the long-term memory text index from the entries."""
        ...

    @abstractmethod
    def audit_position(self) -> ColumnElement[Any]:
        """A value that changes whenever an audit event is appended (every transition
        appends one), read in O(1): the dashboard's change marker."""
        ...

    @abstractmethod
    def storage_settings(self) -> Executable:
        """One row for ``db stats``: the journal mode, the name of the durability setting
        in force (SQLite's ``synchronous``, PostgreSQL's ``synchronous_commit``), and the
        database's size in bytes (NULL: the size of its file is read from the file)."""
        ...

    def notifying(self, update: Update, channel: str, payload: ColumnElement[Any]) -> Executable:
        """``update`` and, where a commit wakes listeners, a notification on ``channel``
        of ``payload`` (an expression over the updated row) for each row it changes, in
        the same statement: one round trip where an update and a ``pg_notify`` took two
        (and, alone, it needs no transaction around it). Either way the result's
        ``rowcount`` is the number of rows the update changed."""
        return update

    #: Whether a committed change can wake listeners (PostgreSQL's ``NOTIFY``); on SQLite
    #: waiters look again after a short sleep.
    notifies: bool = False

    #: Whether writes serialise on advisory locks (:mod:`agentctl.store.locks`), which a
    #: write can also try to take without waiting; SQLite has one writer and none.
    advisory_locks: bool = False

    #: Whether ready task claims are taken in one statement (an ``UPDATE`` of the rows a
    #: ``SKIP LOCKED`` sub-select picked, ``RETURNING`` them), exact with no transaction
    #: around it; SQLite claims in its one writer's transaction instead.
    one_statement_claims: bool = False

    #: Whether one statement can carry a second write in its ``WITH`` (PostgreSQL's
    #: data-modifying CTEs): a budget reservation's ledger move and its rows are one
    #: statement there, two on SQLite.
    writes_in_with: bool = False


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

    def unindexed(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        from sqlalchemy.sql import operators
        from sqlalchemy.sql.expression import UnaryExpression

        # SQLite's unary plus: the same value, and no index of the column is used for it.
        return UnaryExpression(column, operator=operators.custom_op("+"), type_=column.type)

    def json_member(self, document: ColumnElement[Any], name: Any) -> ColumnElement[Any]:
        # ``->`` on text returns the member's JSON text (SQLite 3.38).
        return document.op("->")(name)

    def json_member_name(self, key: str) -> str:
        return f'$."{key}"'

    def memory_text_query(
        self, expression: str, terms: Sequence[str], phrases: Sequence[Sequence[str]]
    ) -> str | None:
        # Sealed entries match the tokens of the words; clear ones (written before
        # `enable`, or by a process that opened the store before it) the words.
        return " OR ".join([expression, *('"' + " ".join(p) + '"' for p in phrases)])

    def memory_text_search(
        self, entries: FromClause, query: Any
    ) -> tuple[FromClause, ColumnElement[bool], ColumnElement[Any]]:
        from sqlalchemy import column, func, literal_column, table

        # FTS5: the virtual table (migration 0003) is not in the schema's metadata; its
        # hidden column of its own name takes MATCH, and bm25() is lower for better.
        fts = table("memory_search_fts", column("rowid"))
        index: ColumnElement[Any] = literal_column("memory_search_fts")
        return (
            fts.join(entries, entries.c.id == fts.c.rowid),
            index.op("MATCH")(query),
            -func.bm25(index),
        )

    def rebuild_memory_text_index(self) -> Executable:
        from sqlalchemy import text

        return text("INSERT INTO memory_search_fts (memory_search_fts) VALUES ('rebuild')")

    def audit_position(self) -> ColumnElement[Any]:
        from sqlalchemy import func, literal_column, select

        from agentctl.store.audit_tables import audit_events

        # The newest event's rowid: one step down the table's b-tree.
        return select(func.max(literal_column("rowid"))).select_from(audit_events).scalar_subquery()

    def storage_settings(self) -> Executable:
        from sqlalchemy import text

        # The pragmas as table-valued functions: one row, in one statement.
        return text(
            "SELECT journal_mode, CASE synchronous WHEN 0 THEN 'OFF' WHEN 1 THEN 'NORMAL' "
            "WHEN 2 THEN 'FULL' WHEN 3 THEN 'EXTRA' ELSE CAST(synchronous AS TEXT) END, NULL "
            "FROM pragma_journal_mode, pragma_synchronous"
        )


class PostgresqlSql(SqlDialect):
    name = POSTGRESQL
    notifies = True
    advisory_locks = True
    one_statement_claims = True
    writes_in_with = True

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

    def notifying(self, update: Update, channel: str, payload: ColumnElement[Any]) -> Executable:
        from sqlalchemy import func, literal, select

        # A data-modifying CTE: one row per updated row, each notifying on commit.
        changed = update.returning(payload.label("payload")).cte("changed")
        return select(func.pg_notify(literal(channel), changed.c.payload)).select_from(changed)

    def insert(self, table: Table) -> Any:
        from sqlalchemy.dialects.postgresql import insert

        return insert(table)

    def unindexed(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        return column  # no unary plus on text; the planner costs the index itself

    def json_member(self, document: ColumnElement[Any], name: Any) -> ColumnElement[Any]:
        from sqlalchemy import JSON, Text, cast

        # ``->`` on the ``json`` type keeps the member's text as stored.
        return cast(cast(document, JSON).op("->")(name), Text)

    def json_member_name(self, key: str) -> str:
        return key

    def memory_text_query(
        self, expression: str, terms: Sequence[str], phrases: Sequence[Sequence[str]]
    ) -> str | None:
        # The quoted terms (word characters only) as an OR tsquery; the sealed index's
        # token phrases join it with <-> (followed by).
        if not terms:
            return None
        alternatives = ["'" + term.replace("'", "''") + "'" for term in terms]
        alternatives.extend("(" + " <-> ".join(phrase) + ")" for phrase in phrases)
        return " | ".join(alternatives)

    def memory_text_search(
        self, entries: FromClause, query: Any
    ) -> tuple[FromClause, ColumnElement[bool], ColumnElement[Any]]:
        from sqlalchemy import func, literal_column

        # Written as the expression index of migration 0003 is, literals included, so
        # the planner answers the match from that GIN index.
        simple: ColumnElement[Any] = literal_column("'simple'")
        document = func.to_tsvector(simple, func.coalesce(entries.c.text, literal_column("''")))
        parsed = func.to_tsquery(simple, query)
        return entries, document.op("@@")(parsed), func.ts_rank_cd(document, parsed)

    def rebuild_memory_text_index(self) -> Executable:
        from sqlalchemy import text

        return text("REINDEX INDEX memory_search_text")

    def audit_position(self) -> ColumnElement[Any]:
        from sqlalchemy import Text, cast, func

        # No rowid: the position of the server's write-ahead log, which every committed
        # write moves (other writes too: a marker that changes more often than needed
        # costs a page a refresh, never a missed change).
        return cast(func.pg_current_wal_lsn(), Text)

    def storage_settings(self) -> Executable:
        from sqlalchemy import text

        # The server's own write-ahead log: no journal mode to report.
        return text(
            "SELECT 'postgresql', upper(current_setting('synchronous_commit')), "
            "pg_database_size(current_database())"
        )


SQLITE_SQL = SqliteSql()
POSTGRESQL_SQL = PostgresqlSql()
_PAIR = {SQLITE: SQLITE_SQL, POSTGRESQL: POSTGRESQL_SQL}


def sql_dialect(name: str) -> SqlDialect:
    """The pair member named ``name`` (``sqlite`` or ``postgresql``)."""
    try:
        return _PAIR[name]
    except KeyError:
        raise ValueError(f"agentctl has no statements for the {name!r} dialect") from None
