"""An open store and what runs SQL on it: :class:`Store` (its ``write()``, ``row_write()``,
``read()`` transactions and driver sessions), :class:`DriverSession` (statements at the
driver, for a run's hot path), the :class:`SqlRunner` protocol every repository takes, and
:class:`StoreSettings`.

Opening a store (files, PostgreSQL URLs, upgrades) is :mod:`agentctl.store.engine`'s, and
the PostgreSQL engine's set-up :mod:`agentctl.store.postgres`'s; both build on this
module, which imports neither, so the repositories and the sealing modules can name these
types without importing the module that opens stores (and the repositories it loads).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from agentctl.errors import PersistenceError
from agentctl.store import migrate
from agentctl.store.dialect import (
    POSTGRESQL,
    READ,
    ROW_LOCKS,
    SQLITE,
    WRITE,
    begin_statement,
)
from agentctl.store.errors import driver_error, retry_window_seconds
from agentctl.store.keyring import CLEAR, Sealer
from agentctl.store.location import MEMORY
from agentctl.store.locks import LateRunLock, Locks, RunFence
from agentctl.store.sealing import SEALER_OPTION, sealer_of
from agentctl.store.sqlite_connections import SQLITE_DRIVER, FileConnections
from agentctl.store.statements import is_compiled

if TYPE_CHECKING:  # psycopg is imported only with a PostgreSQL store
    from agentctl.store.pg_statements import ServerStatements

__all__ = ["DriverSession", "LateRunLock", "RunFence", "SqlRunner", "Store", "StoreSettings"]

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

#: libpq's ``PGRES_TUPLES_OK``: the statement returned rows (psycopg's
#: ``pq.ExecStatus.TUPLES_OK``; psycopg is imported only with a PostgreSQL store).
_ROWS = 2

#: Where a pooled PostgreSQL connection keeps its driver sessions' cursor.
_CURSOR = "agentctl_cursor"

#: Where it keeps what runs the store's statements (store/pg_statements.py).
_STATEMENTS = "agentctl_statements"

#: libpq's ``PQTRANS_IDLE``: no transaction open on the connection.
_IDLE = 0

#: How long a store keeps an idle PostgreSQL connection out of the pool between driver
#: sessions, and how many it keeps (see ``Store._server_connection``). Below the pool's
#: ping threshold (store/postgres.py, ``PING_AFTER_IDLE_SECONDS``).
KEEP_SECONDS = 1.0
KEEP_CONNECTIONS = 8

#: The texts transactions begin with, by ``(dialect, kind, scope)``: a write's is made from
#: its scope's lock keys (a hash per lock, store/locks.py), and a run opens several driver
#: sessions per task. Emptied when it holds :data:`_BEGINS_LIMIT` (one scope per run).
_BEGINS: dict[tuple[str, str, Locks | None], str] = {}
_BEGINS_LIMIT = 1024

#: In a kept connection's ``info`` when it goes back to the pool: when it was given back
#: by its last session, which the pool's check-in takes as the start of its idle time.
KEPT_SINCE = "agentctl_kept_since"


@dataclass(frozen=True, slots=True)
class StoreSettings:
    synchronous: str = "FULL"
    busy_timeout_ms: int = 10_000

    @classmethod
    def from_env(cls) -> StoreSettings:
        value = os.environ.get("AGENTCTL_SQLITE_SYNCHRONOUS", "FULL").upper()
        if value not in _SYNCHRONOUS:
            raise PersistenceError(
                f"AGENTCTL_SQLITE_SYNCHRONOUS={value!r} is not one of {', '.join(_SYNCHRONOUS)}",
                code="store.bad_setting",
                hint="unset it to use FULL, or set NORMAL to relax fsyncs",
            )
        busy = os.environ.get("AGENTCTL_SQLITE_BUSY_TIMEOUT_MS", "10000")
        if not busy.isdigit():
            raise PersistenceError(
                f"AGENTCTL_SQLITE_BUSY_TIMEOUT_MS={busy!r} is not a number of milliseconds",
                code="store.bad_setting",
                hint="unset it to wait up to 10000 ms for another writer",
            )
        return cls(synchronous=value, busy_timeout_ms=int(busy))


class Store:
    """An open database: ``write()`` for IMMEDIATE transactions, ``read()`` for snapshots."""

    def __init__(
        self, engine: Engine | None, path: str, connections: FileConnections | None = None
    ) -> None:
        self._engine = engine
        self.path = path
        # A database file's connections, the engine made over them when first asked for.
        self._connections = connections
        # Seals and opens payload columns (store/sealing.py); every connection handed out
        # carries it, so the repositories find it on the connection they are given.
        self.sealer: Sealer = CLEAR
        # PostgreSQL: pooled connections kept checked out between driver sessions, with
        # when each was last given back, most recent last (see _server_connection).
        self._kept: list[tuple[Any, float]] = []
        self._dialect: str | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            assert self._connections is not None
            self._engine = self._connections.engine()
            self._engine.update_execution_options(**{SEALER_OPTION: self.sealer})
        return self._engine

    def use_sealer(self, sealer: Sealer) -> None:
        """Seal and open payloads with ``sealer`` from now on (on every connection)."""
        self.sealer = sealer
        if self._engine is not None:
            self._engine.update_execution_options(**{SEALER_OPTION: sealer})

    @property
    def location(self) -> str:
        """The database as another process opens it: the file path, or the PostgreSQL URL
        with its password. Never shown (messages show :attr:`path`, masked): hand it to a
        child in its environment with :meth:`child_environment`, never in its argv."""
        if self._connections is not None or self.dialect != POSTGRESQL:
            return self.path
        url = self.engine.url.set(drivername="postgresql")
        return str(url.render_as_string(hide_password=False))

    def child_environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with ``AGENTCTL_DB`` naming this database, for an ``agentctl`` child
        started without ``--db``: another user on the host can read a process's argv
        (``ps``), not its environment."""
        return {**base, "AGENTCTL_DB": self.location}

    @property
    def in_memory(self) -> bool:
        return self.path == MEMORY

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql`` (asked for by every session: read once)."""
        name = self._dialect
        if name is None:
            if self._connections is not None:
                name = SQLITE_DRIVER.name
            else:
                name = str(self.engine.dialect.name)
            self._dialect = name
        return name

    @contextmanager
    def write(self, scope: Locks | None = None) -> Iterator[Connection]:
        """A write transaction. On PostgreSQL it holds the locks of ``scope``
        (:mod:`agentctl.store.locks`: ``locks.run(run_id)`` for a write that concerns one
        run), or the whole store when it names none; on SQLite the one writer's lock."""
        with (
            _translate_errors(self.path),
            self.engine.connect().execution_options(agentctl_locks=scope) as conn,
            conn.begin(),
        ):
            yield conn

    @contextmanager
    def row_write(self) -> Iterator[SqlRunner]:
        """A write transaction exact by row locks alone, for the claims' hot path.

        On PostgreSQL it does not take the store's write lock (``READ COMMITTED``): every
        statement in it must decide on its own rows (a conditional ``UPDATE``, ``SELECT …
        FOR UPDATE SKIP LOCKED``), so it needs no other writer to stand still, and the
        workers' claims and outcomes stop queueing behind every other write of every run.
        Its statements go straight to the driver (a :class:`DriverSession`): a claimed task
        makes several of these, and SQLAlchemy's per-statement work cost the worker more
        CPU than the statements. On SQLite it is an ordinary write (one writer at a time
        anyway).
        """
        if self._connections is None and self.dialect == POSTGRESQL:
            with self.driver_session() as session, session.row_write() as begun:
                yield begun
            return
        with (
            _translate_errors(self.path),
            self.engine.connect().execution_options(agentctl_begin=ROW_LOCKS) as conn,
            conn.begin(),
        ):
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with (
            _translate_errors(self.path),
            self.engine.connect().execution_options(agentctl_begin=READ) as conn,
            conn.begin(),
        ):
            yield conn

    @contextmanager
    def autocommit(self) -> Iterator[SqlRunner]:
        """Statements each exact by itself (a conditional update of one row, and reads
        that say why it changed nothing), each its own transaction.

        On PostgreSQL they run at the driver in autocommit, without the ``BEGIN`` and
        ``COMMIT`` of :meth:`row_write` (two round trips, and the server's work for each):
        use it only where nothing must commit together. On SQLite they run in one
        ordinary write transaction (:meth:`row_write`)."""
        if self._connections is not None or self.dialect != POSTGRESQL:
            with self.row_write() as conn:
                yield conn
            return
        with self.driver_session() as session:
            yield session

    @contextmanager
    def read_one(self) -> Iterator[SqlRunner]:
        """A read of exactly one statement, for the polls of a run's hot path (a batch's
        outcomes, the cancel flag, an effect's journal position).

        On PostgreSQL the statement runs at the driver in autocommit: one statement sees
        one snapshot by itself, so the ``BEGIN … REPEATABLE READ`` and ``COMMIT`` that
        :meth:`read` sends around it (two more round trips, and the server's work for
        each) buy nothing. A second statement through it raises ``RuntimeError``: reads
        that must agree with each other belong in :meth:`read`. On SQLite it is
        :meth:`read`, with the same one-statement rule."""
        if self._connections is not None or self.dialect != POSTGRESQL:
            with self.read() as conn:
                yield _OneStatement(conn)
            return
        with self.driver_session() as session:
            yield _OneStatement(session)

    @contextmanager
    def driver_session(
        self,
        on_begin: Callable[[DriverSession], None] | None = None,
        *,
        scope: Locks | None = None,
        late_fence: RunFence | None = None,
    ) -> Iterator[DriverSession]:
        """One pooled connection used at the driver level, for a run's hot path.

        A task transition is a handful of fixed statements; going straight to the sqlite3
        driver keeps its cost near the fsync of its commit. Transactions still begin
        IMMEDIATE and either commit whole or roll back; on PostgreSQL its write
        transactions hold the locks of ``scope`` (see :meth:`write`). With ``late_fence``
        (a claimed task's writes) a PostgreSQL write holds the store lock from its start
        and its run's lock only from the first read of the run's chain head or budget
        ledger to the commit (:func:`agentctl.store.locks.hold_run`), the fence checked
        after it; on SQLite the fence is checked at ``BEGIN IMMEDIATE``.
        """
        # On PostgreSQL the pool's connections are in autocommit at the driver (see
        # store/postgres.py): statements outside write() see committed data and hold no
        # transaction open, as on SQLite; write() issues its own BEGIN.
        reconnect: Callable[[], tuple[Any, Callable[[], None]]] | None = None
        try:
            if self._connections is not None:
                raw, give_back = self._connections.checkout()
                dialect: Any = SQLITE_DRIVER
            else:
                raw, give_back = self._server_connection()
                dialect, reconnect = self.engine.dialect, self._server_connection
        except _driver_errors() as exc:  # a server that cannot be reached: store.unreachable
            raise driver_error(self.path, exc) from exc
        except DBAPIError as exc:
            raise driver_error(self.path, exc.orig) from exc
        session = DriverSession(
            raw,
            self.path,
            on_begin,
            dialect=dialect,
            give_back=give_back,
            reconnect=reconnect,
            scope=scope,
            late_fence=late_fence,
        )
        session.sealer = self.sealer
        try:
            yield session
        finally:
            session.give_back()

    def _server_connection(self) -> tuple[Any, Callable[[], None]]:
        """A pooled PostgreSQL connection and how to give it back: a connection that was
        lost (the server restarted) is thrown away, not returned to the pool.

        On PostgreSQL a connection given back idle (no transaction open) is kept by this
        store for the next driver session, up to :data:`KEEP_SECONDS` and
        :data:`KEEP_CONNECTIONS`: the pool's check-out and check-in (its queue, events
        and reset) cost a worker more CPU than the statement a session often sends, and
        a claimed task opens some eight sessions. One kept longer goes back to the pool
        as idle since it was given back, so the pool's ping on check-out still sees
        how long it sat (store/postgres.py)."""
        raw = self._kept_connection()
        if raw is None:
            try:
                raw = self.engine.raw_connection()
            except DBAPIError as exc:
                raise driver_error(self.path, exc.orig) from exc

        def give_back() -> None:
            driver = raw.driver_connection
            # psycopg says closed/broken; an in-memory SQLite engine's connection (dry runs,
            # check mode) has neither and is never lost.
            if (
                driver is None
                or getattr(driver, "closed", False)
                or getattr(driver, "broken", False)
            ):
                raw.invalidate()
            elif (
                self.dialect == POSTGRESQL
                and len(self._kept) < KEEP_CONNECTIONS
                and driver.pgconn.transaction_status == _IDLE
            ):
                self._kept.append((raw, time.monotonic()))
                return
            raw.close()

        return raw, give_back

    def _kept_connection(self) -> Any:
        """The connection kept last, if it was given back less than :data:`KEEP_SECONDS`
        ago; older ones go back to the pool, marked with when they were given back."""
        while True:
            try:
                raw, since = self._kept.pop()  # atomic: sessions run on several threads
            except IndexError:
                return None
            if time.monotonic() - since < KEEP_SECONDS:
                return raw
            raw.info[KEPT_SINCE] = since
            raw.close()

    def _release_kept(self) -> None:
        while self._kept:
            try:
                raw, since = self._kept.pop()
            except IndexError:
                return
            raw.info[KEPT_SINCE] = since
            raw.close()

    def reads_one_by_one(self) -> SqlRunner:
        """A runner of read statements, each in a read transaction of its own, its rows
        fetched at once: for a reader that holds no connection (a cached snapshot)."""
        return _ReadEach(self)

    def revision(self) -> str | None:
        with self.read() as conn:
            return migrate.current_revision(conn)

    def close(self) -> None:
        if self._connections is not None:
            self._connections.close()
        else:
            self._release_kept()
            self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SqlRunner(Protocol):
    """Anything that runs driver-level SQL: a SQLAlchemy Connection or a DriverSession."""

    @property
    def dialect(self) -> Any: ...

    def exec_driver_sql(self, statement: str, parameters: Any = ...) -> Any: ...


class _DriverResult:
    __slots__ = ("_cursor",)

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    def first(self) -> Any:
        return self._cursor.fetchone()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor.fetchall())


class _SqliteResult(sqlite3.Cursor):
    """A SQLite statement's result: the driver's cursor itself, with what
    :class:`_DriverResult` offers (``first()``, ``rowcount``, the rows when iterated). Made
    by the driver in C, with no ``__init__`` of ours: a transition runs seven statements,
    and a wrapper made per statement cost each a Python call."""

    first = sqlite3.Cursor.fetchone

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        return iter(self.fetchall())  # read at once, as _DriverResult reads them


class _Fetched(_DriverResult):
    __slots__ = ("_count", "_rows")

    def __init__(self, rows: list[Any], rowcount: int | None = None) -> None:
        self._rows = rows
        self._count = len(rows) if rowcount is None else rowcount

    @property
    def rowcount(self) -> int:
        return self._count

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class _ReadEach:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.sealer = store.sealer

    @property
    def dialect(self) -> Any:
        store = self._store
        return SQLITE_DRIVER if store.dialect == SQLITE else store.engine.dialect

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> _Fetched:
        with self._store.read() as conn:
            return _Fetched(list(conn.exec_driver_sql(statement, parameters)))


class _OneStatement:
    """A runner that executes one statement (:meth:`Store.read_one`)."""

    __slots__ = ("_runner", "_used", "dialect", "sealer")

    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self._used = False
        self.dialect = runner.dialect
        self.sealer = sealer_of(runner)

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> Any:
        if self._used:
            raise RuntimeError(
                "Store.read_one() runs one statement; use Store.read() for reads that must "
                "see one snapshot together"
            )
        self._used = True
        return self._runner.exec_driver_sql(statement, parameters)


class _Transaction:
    """One transaction of a :class:`DriverSession` (see its ``_transaction``): a plain
    context manager, not a generator's, because a run opens one per task transition."""

    __slots__ = ("_begin", "_cursor", "_late", "_on_begin", "_session")

    def __init__(
        self,
        session: DriverSession,
        begin: str,
        on_begin: Callable[[DriverSession], None] | None,
        late: RunFence | None = None,
    ) -> None:
        self._session = session
        self._begin = begin
        self._on_begin = on_begin
        self._late = late
        self._cursor: Any = None

    def __enter__(self) -> DriverSession:
        session = self._session
        try:
            self._cursor = session._begun(self._begin)
        except _driver_errors() as exc:
            raise driver_error(session._where, exc) from exc
        session.chain_heads = {}
        session.late_run_lock = None if self._late is None else LateRunLock(self._late)
        if self._on_begin is not None:
            try:
                self._on_begin(session)
            except BaseException as exc:
                self.__exit__(type(exc), exc, None)
                raise
        return session

    def __exit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> None:
        session = self._session
        late, session.late_run_lock = session.late_run_lock, None
        if kind is None and late is not None and not late.taken:
            # Nothing of the run's serialised rows was touched: the claim's fence is still
            # checked (its row locked) before anything of the transaction commits.
            try:
                late.fence.check(session)
            except BaseException as failed:
                self.__exit__(type(failed), failed, None)
                raise
        session.chain_heads = None
        try:
            self._cursor.execute("ROLLBACK" if kind is not None else "COMMIT")
        except _driver_errors() as failed:
            raise driver_error(session._where, failed) from failed
        if exc is not None and isinstance(exc, _driver_errors()):
            raise driver_error(session._where, exc) from exc


class DriverSession:
    """``exec_driver_sql`` over a raw driver connection, with write transactions that take
    the write's locks first (``BEGIN IMMEDIATE`` on SQLite, the advisory locks of its
    scope on PostgreSQL)."""

    sealer: Sealer = CLEAR
    #: Inside a transaction, the audit chain heads this transaction read or appended
    #: (``run id -> (seq, digest)``, see ``audit_repo.chain_head``); None outside one.
    chain_heads: dict[str, tuple[int, str]] | None = None
    #: Inside a write whose run lock is deferred (``late_fence``), that lock; else None.
    late_run_lock: LateRunLock | None = None

    def __init__(
        self,
        raw: Any,
        where: str,
        on_begin: Callable[[DriverSession], None] | None = None,
        *,
        dialect: Any = None,
        give_back: Callable[[], None] | None = None,
        reconnect: Callable[[], tuple[Any, Callable[[], None]]] | None = None,
        scope: Locks | None = None,
        late_fence: RunFence | None = None,
    ) -> None:
        self._raw = raw
        self._cursor: Any = None
        self._server: ServerStatements | None = None
        self._give_back = give_back
        self._reconnect = reconnect
        self._where = where
        self._on_begin = on_begin
        self.dialect = dialect
        self._postgres = dialect is not None and dialect.name == POSTGRESQL
        # SQLite: the driver's own connection under the pool's proxy (which a pooled one
        # is), which makes each statement's cursor (its result) in C. A task transition
        # runs seven statements; the proxy's ``cursor()`` and a wrapper made in Python for
        # each cost a run of 500 steps several milliseconds of CPU.
        self._sqlite: sqlite3.Connection | None = (
            None if self._postgres else getattr(raw, "dbapi_connection", raw)
        )
        self._dialect_name = POSTGRESQL if self._postgres else SQLITE
        self._begins: dict[str, str] = {}
        self._scope = scope
        self._late_fence = late_fence if self._postgres else None
        if self._late_fence is not None:
            # The store lock alone (shared: store-wide writes still exclude this one); the
            # run's lock is taken late, by locks.hold_run.
            self._scope = Locks()
        elif late_fence is not None:  # SQLite: one writer, the fence checked at BEGIN
            self._on_begin = late_fence.check

    def _begin(self, kind: str) -> str:
        """The statement this session's ``kind`` transactions begin with: looked up when
        one begins (most sessions begin one kind, or none: a claimed task's autocommitted
        statements), each text made once per scope (:data:`_BEGINS`)."""
        found = self._begins.get(kind)
        if found is None:
            key = (self._dialect_name, kind, self._scope)
            found = _BEGINS.get(key)
            if found is None:
                found = begin_statement(*key)
                if len(_BEGINS) >= _BEGINS_LIMIT:
                    _BEGINS.clear()
                _BEGINS[key] = found
            self._begins[kind] = found  # a run's own session begins hundreds
        return found

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> _DriverResult:
        driver = self._sqlite
        if driver is not None:
            try:
                cursor = driver.cursor(_SqliteResult)
                if isinstance(parameters, list):  # one execution per row, as SQLAlchemy's
                    return cursor.executemany(statement, parameters)  # type: ignore[return-value]
                return cursor.execute(statement, parameters)  # type: ignore[return-value]
            except sqlite3.Error as exc:
                raise driver_error(self._where, exc) from exc
        try:
            if self._postgres and not isinstance(parameters, list) and is_compiled(statement):
                # A store statement: converted and prepared once per connection, sent by
                # libpq with its rows taken now (store/pg_statements.py).
                rows, count = self._server_statements().run(statement, parameters)
                return _Fetched(rows, count)
            cursor = self._session_cursor()
            if isinstance(parameters, list):  # one execution per row, as SQLAlchemy's
                cursor.executemany(statement, parameters)
            elif self._postgres:
                # Text without parameters (a BEGIN): psycopg reads no placeholders in it.
                cursor.execute(statement, parameters or None)
            else:
                cursor.execute(statement, parameters)
            if self._postgres:
                # The connection's one cursor runs the next statement too: its rows are
                # taken now (psycopg holds the whole result in memory already).
                result = cursor.pgresult
                rows = cursor.fetchall() if result is not None and result.status == _ROWS else []
                return _Fetched(rows, cursor.rowcount)
        except _driver_errors() as exc:
            # Outside a transaction too (a read in autocommit): a lost connection is the
            # store's transient store.unreachable, never a driver exception.
            raise driver_error(self._where, exc) from exc
        return _DriverResult(cursor)

    def _connection(self) -> Any:
        """The session's pooled connection; one lost before (see :meth:`_begun`) is
        replaced first: nothing of the next statement was sent yet."""
        if self._raw is None:
            assert self._reconnect is not None
            self._raw, self._give_back = self._reconnect()
            self._cursor = self._server = None
        return self._raw

    def _session_cursor(self) -> Any:
        """The cursor a statement runs on. On PostgreSQL one per pooled connection, made
        once and kept with it (``info``, which the pool drops with the connection), for
        what is not a store statement (:meth:`_server_statements`): a psycopg cursor cost
        the worker more CPU to make than sending its statement. On SQLite the driver's
        connection, whose ``execute`` makes a cursor per statement (its rows are read as
        the caller asks)."""
        if self._sqlite is not None:
            return self._sqlite
        raw = self._connection()
        if self._cursor is None:
            kept = getattr(raw, "info", None)
            cursor = None if kept is None else kept.get(_CURSOR)
            if cursor is None or cursor.closed:
                cursor = raw.cursor()
                if kept is not None:
                    kept[_CURSOR] = cursor
            self._cursor = cursor
        return self._cursor

    def _server_statements(self) -> ServerStatements:
        """What runs the store's statements, BEGIN and COMMIT on PostgreSQL: one per
        psycopg connection, kept with the pooled connection like its cursor (its prepared
        statements live as long as that server session)."""
        if self._server is None:
            from agentctl.store.pg_statements import ServerStatements

            raw = self._connection()
            driver = raw.driver_connection
            kept = raw.info
            found = kept.get(_STATEMENTS)
            if found is None or found.connection is not driver:
                found = kept[_STATEMENTS] = ServerStatements(driver)
            self._server = found
        return self._server

    def write(self) -> AbstractContextManager[DriverSession]:
        """A write transaction that holds its locks from its start (or, with a
        ``late_fence``, the store lock from its start and its run's lock from the first
        read of the run's chain head or ledger: :func:`agentctl.store.locks.hold_run`)."""
        if self._late_fence is not None:
            return _Transaction(self, self._begin(WRITE), None, self._late_fence)
        return self._transaction(self._begin(WRITE), self._on_begin)

    def row_write(self) -> AbstractContextManager[DriverSession]:
        """A write transaction exact by row locks alone (see :meth:`Store.row_write`)."""
        return self._transaction(self._begin(ROW_LOCKS), None)

    def read(self) -> AbstractContextManager[DriverSession]:
        """A read transaction (one snapshot for every statement in it, no lock taken)."""
        return self._transaction(self._begin(READ), None)

    def _transaction(
        self, begin: str, on_begin: Callable[[DriverSession], None] | None
    ) -> _Transaction:
        """Committed whole, or rolled back when the body raises; driver errors become the
        store's (store/errors.py)."""
        return _Transaction(self, begin, on_begin)

    def _begun(self, begin: str) -> Any:
        """What sent the transaction's BEGIN and sends its COMMIT: on PostgreSQL the
        connection's :meth:`_server_statements`, on SQLite the driver's connection. A
        connection lost before the transaction (the server restarted since the last one) is
        replaced and the BEGIN sent again, with backoff, within the store's retry window:
        nothing of this transaction reached the server, so nothing can have been done
        twice. A connection lost later fails the transaction with ``store.unreachable``:
        whether its COMMIT landed is unknown."""
        driver = self._sqlite
        if driver is not None:  # nothing to reconnect: a failed BEGIN is the store's error
            try:
                driver.execute(begin)
            except sqlite3.Error as exc:
                raise driver_error(self._where, exc) from exc
            return driver
        # The window starts at the first attempt; it is read only once one has failed (the
        # environment lookup is not paid by every transaction).
        delay, started, deadline = 0.05, time.monotonic(), None
        while True:
            try:
                runner = self._server_statements() if self._postgres else self._session_cursor()
                runner.execute(begin)
                return runner
            except PersistenceError as found:  # the new connection could not be opened
                error = found
            except _driver_errors() as exc:
                error = driver_error(self._where, exc)
                error.__cause__ = exc
            if deadline is None:
                deadline = started + retry_window_seconds()
            if (
                self._reconnect is None
                or error.code != "store.unreachable"
                or time.monotonic() + delay > deadline
            ):
                raise error
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            self.give_back()
            self._raw = self._cursor = self._server = None

    def give_back(self) -> None:
        """Return the connection to its pool (once)."""
        give_back, self._give_back = self._give_back, None
        self._cursor = self._server = None
        if give_back is not None:
            give_back()


def _driver_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [sqlite3.Error]
    if "psycopg" in sys.modules:
        errors.append(sys.modules["psycopg"].Error)
    return tuple(errors)


@contextmanager
def _translate_errors(where: str) -> Iterator[None]:
    try:
        yield
    except DBAPIError as exc:
        raise driver_error(where, exc.orig) from exc
    except SQLAlchemyError as exc:
        raise PersistenceError(
            f"database error on {where}: {exc}", code="store.database_error"
        ) from exc
