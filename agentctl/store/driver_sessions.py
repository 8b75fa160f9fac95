"""Statements at the driver: :class:`DriverSession` (a pooled connection used below
SQLAlchemy, for a run's hot path), its transactions and results, and the small runners a
:class:`~agentctl.store.runner.Store` hands out for one statement or one read each.

A task transition is a handful of fixed statements; going straight to the sqlite3 driver,
or to libpq through psycopg's prepared statements (store/pg_statements.py), keeps its cost
near the commit's. The store itself (its pool, its SQLAlchemy transactions, the kept
PostgreSQL connections) is :mod:`agentctl.store.runner`'s; docs/architecture.md places
both in the store's floor.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from agentctl.errors import PersistenceError
from agentctl.store.dialect import (
    POSTGRESQL,
    READ,
    ROW_LOCKS,
    SQLITE,
    WRITE,
    begin_statement,
    begin_steps,
)
from agentctl.store.errors import driver_error, retry_window_seconds
from agentctl.store.keyring import CLEAR, Sealer
from agentctl.store.locks import LateRunLock, Locks, RunFence, Step
from agentctl.store.sealing import sealer_of
from agentctl.store.sqlite_connections import SQLITE_DRIVER
from agentctl.store.statements import is_compiled

if TYPE_CHECKING:  # psycopg is imported only with a PostgreSQL store
    from agentctl.store.pg_statements import ServerStatements
    from agentctl.store.runner import Store

__all__ = ["DriverSession", "OneStatement", "ReadEach", "driver_errors"]

#: libpq's ``PGRES_TUPLES_OK``: the statement returned rows (psycopg's
#: ``pq.ExecStatus.TUPLES_OK``; psycopg is imported only with a PostgreSQL store).
_ROWS = 2

#: libpq's ``PQTRANS_IDLE``: no transaction open (psycopg's ``pq.TransactionStatus.IDLE``).
_IDLE = 0

#: Where a pooled PostgreSQL connection keeps its driver sessions' cursor.
_CURSOR = "agentctl_cursor"

#: Where it keeps what runs the store's statements (store/pg_statements.py).
_STATEMENTS = "agentctl_statements"

#: How transactions begin, by ``(dialect, kind, scope)``: a text (SQLite, or a PostgreSQL
#: transaction of one ``BEGIN``), or a PostgreSQL write's statements, its ``BEGIN`` and each
#: lock, sent in one pipelined round trip. A write's are made from its scope's lock keys (a
#: hash per lock, store/locks.py), and a run opens several driver sessions per task.
#: Emptied when it holds :data:`_BEGINS_LIMIT` (one scope per run).
_BEGINS: dict[tuple[str, str, Locks | None], str | tuple[Step, ...]] = {}
_BEGINS_LIMIT = 1024


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


class ReadEach:
    """Read statements each in a read transaction of its own, rows fetched at once
    (:meth:`Store.reads_one_by_one <agentctl.store.runner.Store.reads_one_by_one>`)."""

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


class OneStatement:
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
    context manager, not a generator's, because a run opens one per task transition. On
    PostgreSQL its ``BEGIN`` and locks wait for its first statement and go in that
    statement's round trip (one pipeline); a claimed task's fence goes with its
    ``COMMIT``."""

    __slots__ = ("_begin", "_cursor", "_late", "_on_begin", "_session")

    def __init__(
        self,
        session: DriverSession,
        begin: str | tuple[Step, ...],
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
        begin = self._begin
        if session._postgres:
            # Sent with the transaction's first statement, in its round trip: every
            # statement of it still runs after the BEGIN and its locks (exec_driver_sql).
            session._pending = ((begin, None),) if isinstance(begin, str) else begin
        else:
            try:
                self._cursor = session._begun(begin)
            except driver_errors() as exc:
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
        session.chain_heads = None
        pending, session._pending = session._pending, None
        if pending is not None:  # nothing of the transaction was sent
            if kind is not None:  # nothing to roll back
                if exc is not None and isinstance(exc, driver_errors()):
                    raise driver_error(session._where, exc) from exc
                return
            try:
                session._begun(pending)  # an empty write still waits for its locks
            except PersistenceError:
                session._abandon()
                raise
        if session._postgres:
            self._cursor = session._server_statements()
        if kind is None and late is not None and not late.taken:
            # Nothing of the run's serialised rows was touched: the claim's fence is still
            # checked (its row locked) before anything of the transaction commits, in the
            # round trip of the COMMIT, which the server skips when the fence fails.
            try:
                late.fence.commit(session)
            except driver_errors() as failed:
                raise driver_error(session._where, failed) from failed
            return
        try:
            self._cursor.execute("ROLLBACK" if kind is not None else "COMMIT")
        except driver_errors() as failed:
            raise driver_error(session._where, failed) from failed
        if exc is not None and isinstance(exc, driver_errors()):
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
        self._begins: dict[str, str | tuple[Step, ...]] = {}
        #: On PostgreSQL, inside a transaction until its first statement: its BEGIN (and
        #: locks), sent with that statement in one pipeline (:meth:`exec_driver_sql`).
        self._pending: tuple[Step, ...] | None = None
        self._scope = scope
        self._late_fence = late_fence if self._postgres else None
        if self._late_fence is not None:
            # The store lock alone (shared: store-wide writes still exclude this one); the
            # run's lock is taken late, by locks.hold_run.
            self._scope = Locks()
        elif late_fence is not None:  # SQLite: one writer, the fence checked at BEGIN
            self._on_begin = late_fence.check

    def _begin(self, kind: str) -> str | tuple[Step, ...]:
        """The statement this session's ``kind`` transactions begin with: looked up when
        one begins (most sessions begin one kind, or none: a claimed task's autocommitted
        statements), each text made once per scope (:data:`_BEGINS`)."""
        found = self._begins.get(kind)
        if found is None:
            key = (self._dialect_name, kind, self._scope)
            found = _BEGINS.get(key)
            if found is None:
                found = _begin_with(*key)
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
                # libpq with its rows taken now (store/pg_statements.py); a transaction's
                # first one with the transaction's BEGIN, in one round trip.
                if self._pending is not None:
                    rows, count = self._begun_with(statement, parameters)
                else:
                    rows, count = self._server_statements().run(statement, parameters)
                return _Fetched(rows, count)
            if self._pending is not None:  # not a store statement: the BEGIN goes first
                pending, self._pending = self._pending, None
                self._begun(pending)
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
        except driver_errors() as exc:
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
        self, begin: str | tuple[Step, ...], on_begin: Callable[[DriverSession], None] | None
    ) -> _Transaction:
        """Committed whole, or rolled back when the body raises; driver errors become the
        store's (store/errors.py)."""
        return _Transaction(self, begin, on_begin)

    def _begun_with(self, statement: str, parameters: Any) -> tuple[list[Any], int]:
        """Send the transaction's pending BEGIN (and locks) and its first statement in one
        pipeline (:meth:`_begun`'s retries included: nothing of the transaction reached the
        server before): that statement's rows and count. A lock that times out or a
        statement that fails raises the store's error, as when sent apart."""
        assert self._pending is not None
        pending, self._pending = self._pending, None
        answers: list[tuple[list[Any], int]] = self._begun(
            (*pending, (statement, parameters)), answers=True
        )
        return answers[-1]

    def _begun(self, begin: str | tuple[Step, ...], *, answers: bool = False) -> Any:
        """What sent the transaction's BEGIN and sends its COMMIT: on PostgreSQL the
        connection's :meth:`_server_statements`, on SQLite the driver's connection. A
        connection lost before the transaction (the server restarted since the last one) is
        replaced and the BEGIN sent again, with backoff, within the store's retry window:
        nothing of this transaction reached the server, so nothing can have been done
        twice. A connection lost later fails the transaction with ``store.unreachable``:
        whether its COMMIT landed is unknown."""
        driver = self._sqlite
        if driver is not None:  # nothing to reconnect: a failed BEGIN is the store's error
            assert isinstance(begin, str)
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
                if self._postgres:
                    runner = self._server_statements()
                    if isinstance(begin, str):
                        runner.execute(begin)
                    else:  # its BEGIN and locks (and its first statement), one round trip
                        found = runner.pipeline(begin)
                        if answers:
                            return found
                    return runner
                runner = self._session_cursor()
                runner.execute(begin)
                return runner
            except PersistenceError as found:  # the new connection could not be opened
                error = found
            except driver_errors() as exc:
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

    def _abandon(self) -> None:
        """Roll back what a failed pipelined BEGIN left open (its lock timed out), if the
        connection still answers; a lost one is replaced by the next transaction."""
        server = self._server
        if server is not None and server.connection.info.transaction_status != _IDLE:
            try:
                server.execute("ROLLBACK")
            except driver_errors():
                pass

    def commit_after(self, statement: str, parameters: Sequence[Any]) -> None:
        """End this session's transaction (PostgreSQL) with ``statement`` and ``COMMIT``
        in one round trip: the commit lands only when the statement succeeded. When it
        failed, the transaction is rolled back and the statement's driver error raised,
        which a statement can use to refuse the commit (a claim's fence)."""
        server = self._server_statements()
        try:
            server.pipeline(((statement, parameters), ("COMMIT", None)))
        except driver_errors():
            if server.connection.info.transaction_status != _IDLE:
                server.execute("ROLLBACK")
            raise

    def give_back(self) -> None:
        """Return the connection to its pool (once)."""
        give_back, self._give_back = self._give_back, None
        self._cursor = self._server = None
        if give_back is not None:
            give_back()


def _begin_with(dialect: str, kind: str, scope: Locks | None) -> str | tuple[Step, ...]:
    """How a ``kind`` transaction of ``scope`` begins on ``dialect`` (:data:`_BEGINS`)."""
    if dialect == POSTGRESQL:
        steps = begin_steps(kind, scope)
        if len(steps) > 1:
            return steps
        ((text, _),) = steps
        return text
    return begin_statement(dialect, kind, scope)


def driver_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [sqlite3.Error]
    if "psycopg" in sys.modules:
        errors.append(sys.modules["psycopg"].Error)
    return tuple(errors)
