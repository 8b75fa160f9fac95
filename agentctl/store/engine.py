"""Opening the SQLite store: file set-up, pragmas, transactions, upgrade on open.

Settings and why:
- WAL: readers never block the one writer.
- ``synchronous=FULL`` by default: a committed transition survives power loss. Set
  ``AGENTCTL_SQLITE_SYNCHRONOUS=NORMAL`` to trade the last commits before an OS crash for
  fewer fsyncs (process crashes stay safe in WAL mode either way).
- Foreign keys on; ``busy_timeout`` so a second process waits instead of failing.
- Write transactions begin ``IMMEDIATE``: the write lock is taken at BEGIN, so two writers
  never deadlock upgrading a read lock halfway through a transition.
- Database, WAL and shared-memory files are created with mode 0600 (they hold prompts and
  outputs); the parent directory is created 0700 when missing.
- Connections are opened at the driver (``store.sqlite_connections``); SQLAlchemy's engine
  is made over them only for what uses it (``write()``, ``read()``), never for a run's
  claim, transitions and completion, which go through :meth:`Store.driver_session`.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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
    to_postgres,
)
from agentctl.store.errors import driver_error, retry_window_seconds
from agentctl.store.location import MEMORY, is_postgres_url
from agentctl.store.locks import Locks
from agentctl.store.sealing import CLEAR, SEALER_OPTION, Sealer
from agentctl.store.sqlite_connections import (
    SQLITE_DRIVER,
    FileConnections,
    address,
    connect,
    make_engine,
)
from agentctl.store.statements import is_compiled

__all__ = ["DriverSession", "SqlRunner", "Store", "StoreSettings", "open_store"]

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


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
        """``sqlite`` or ``postgresql``."""
        if self._connections is not None:
            return SQLITE_DRIVER.name
        return str(self.engine.dialect.name)

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
    def row_write(self) -> Iterator[Connection]:
        """A write transaction exact by row locks alone, for the claims' hot path.

        On PostgreSQL it does not take the store's write lock (``READ COMMITTED``): every
        statement in it must decide on its own rows (a conditional ``UPDATE``, ``SELECT …
        FOR UPDATE SKIP LOCKED``), so it needs no other writer to stand still, and the
        workers' claims and outcomes stop queueing behind every other write of every run.
        On SQLite it is an ordinary write (one writer at a time anyway).
        """
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
    def driver_session(
        self,
        on_begin: Callable[[DriverSession], None] | None = None,
        *,
        scope: Locks | None = None,
    ) -> Iterator[DriverSession]:
        """One pooled connection used at the driver level, for a run's hot path.

        A task transition is a handful of fixed statements; going straight to the sqlite3
        driver keeps its cost near the fsync of its commit. Transactions still begin
        IMMEDIATE and either commit whole or roll back; on PostgreSQL its write
        transactions hold the locks of ``scope`` (see :meth:`write`).
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
        )
        session.sealer = self.sealer
        try:
            yield session
        finally:
            session.give_back()

    def _server_connection(self) -> tuple[Any, Callable[[], None]]:
        """A pooled PostgreSQL connection and how to give it back: a connection that was
        lost (the server restarted) is thrown away, not returned to the pool."""
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
            raw.close()

        return raw, give_back

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
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    def first(self) -> Any:
        return self._cursor.fetchone()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor.fetchall())


class _Fetched(_DriverResult):
    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    @property
    def rowcount(self) -> int:
        return len(self._rows)

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


class _Transaction:
    """One transaction of a :class:`DriverSession` (see its ``_transaction``): a plain
    context manager, not a generator's, because a run opens one per task transition."""

    __slots__ = ("_begin", "_cursor", "_on_begin", "_session")

    def __init__(
        self,
        session: DriverSession,
        begin: str,
        on_begin: Callable[[DriverSession], None] | None,
    ) -> None:
        self._session = session
        self._begin = begin
        self._on_begin = on_begin
        self._cursor: Any = None

    def __enter__(self) -> DriverSession:
        session = self._session
        try:
            self._cursor = session._begun(self._begin)
        except _driver_errors() as exc:
            raise driver_error(session._where, exc) from exc
        if self._on_begin is not None:
            try:
                self._on_begin(session)
            except BaseException as exc:
                self.__exit__(type(exc), exc, None)
                raise
        return session

    def __exit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> None:
        try:
            self._cursor.execute("ROLLBACK" if kind is not None else "COMMIT")
        except _driver_errors() as failed:
            raise driver_error(self._session._where, failed) from failed
        if exc is not None and isinstance(exc, _driver_errors()):
            raise driver_error(self._session._where, exc) from exc


class DriverSession:
    """``exec_driver_sql`` over a raw driver connection, with write transactions that take
    the write's locks first (``BEGIN IMMEDIATE`` on SQLite, the advisory locks of its
    scope on PostgreSQL)."""

    sealer: Sealer = CLEAR

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
    ) -> None:
        self._raw = raw
        self._give_back = give_back
        self._reconnect = reconnect
        self._where = where
        self._on_begin = on_begin
        self.dialect = dialect
        self._postgres = dialect is not None and dialect.name == POSTGRESQL
        name = POSTGRESQL if self._postgres else SQLITE
        self._begin = {kind: begin_statement(name, kind, scope) for kind in (WRITE, READ)}

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> _DriverResult:
        try:
            if self._raw is None:  # lost before: nothing of this statement was sent yet
                assert self._reconnect is not None
                self._raw, self._give_back = self._reconnect()
            cursor = self._raw.cursor()
            if isinstance(parameters, list):  # one execution per row, as SQLAlchemy's
                cursor.executemany(statement, parameters)
            elif self._postgres and is_compiled(statement):
                cursor.execute(statement, parameters)
            elif self._postgres:
                cursor.execute(to_postgres(statement, bool(parameters)), parameters or None)
            else:
                cursor.execute(statement, parameters)
        except _driver_errors() as exc:
            # Outside a transaction too (a read in autocommit): a lost connection is the
            # store's transient store.unreachable, never a driver exception.
            raise driver_error(self._where, exc) from exc
        return _DriverResult(cursor)

    def write(self) -> AbstractContextManager[DriverSession]:
        """A write transaction that holds its locks from its start."""
        return self._transaction(self._begin[WRITE], self._on_begin)

    def read(self) -> AbstractContextManager[DriverSession]:
        """A read transaction (one snapshot for every statement in it, no lock taken)."""
        return self._transaction(self._begin[READ], None)

    def _transaction(
        self, begin: str, on_begin: Callable[[DriverSession], None] | None
    ) -> _Transaction:
        """Committed whole, or rolled back when the body raises; driver errors become the
        store's (store/errors.py)."""
        return _Transaction(self, begin, on_begin)

    def _begun(self, begin: str) -> Any:
        """A cursor whose transaction has begun. A connection lost before the transaction
        (the server restarted since the last one) is replaced and the BEGIN sent again,
        with backoff, within the store's retry window: nothing of this transaction reached
        the server, so nothing can have been done twice. A connection lost later fails the
        transaction with ``store.unreachable``: whether its COMMIT landed is unknown."""
        # The window starts at the first attempt; it is read only once one has failed (the
        # environment lookup is not paid by every transaction).
        delay, started, deadline = 0.05, time.monotonic(), None
        while True:
            try:
                if self._raw is None:
                    assert self._reconnect is not None
                    self._raw, self._give_back = self._reconnect()
                cursor = self._raw.cursor()
                cursor.execute(begin)
                return cursor
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
            self._raw = None

    def give_back(self) -> None:
        """Return the connection to its pool (once)."""
        give_back, self._give_back = self._give_back, None
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


def _create_file(path: Path) -> None:
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)


def _restrict_modes(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        candidate = Path(str(path) + suffix)
        if candidate.exists() and (candidate.stat().st_mode & 0o777) != 0o600:
            os.chmod(candidate, 0o600)


def _read_only(path: Path) -> bool:
    """An existing database the operator made read-only (no write bit, or no access). Root
    may write any file, so the mode bits are honoured explicitly."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return (mode & 0o222) == 0 or not os.access(path, os.W_OK)


def _first_connection(path: str, settings: StoreSettings, *, read_only: bool) -> sqlite3.Connection:
    try:
        return connect(
            address(path, read_only)[1],
            settings.synchronous,
            settings.busy_timeout_ms,
            wal=not read_only,
        )
    except sqlite3.Error as exc:
        raise driver_error(path, exc) from exc


def open_store(
    db_path: str,
    *,
    migrate_schema: bool = True,
    settings: StoreSettings | None = None,
    create: bool = True,
) -> Store:
    """Open (creating if needed) and upgrade the database at ``db_path``.

    ``db_path`` may also be a ``postgresql://`` URL: that database must exist already (see
    :mod:`agentctl.store.postgres`); it is never created as a file.

    With ``create=False`` (commands that read or act on existing records) a missing file is
    an error and nothing is created: a mistyped ``--db`` must not leave an empty database
    behind and report "no runs".

    A database at a revision this code does not know is refused before any byte of it is
    written. Upgrading happens in one IMMEDIATE transaction, so two processes opening a new
    database at once migrate it exactly once.
    """
    settings = settings or StoreSettings.from_env()
    if is_postgres_url(db_path):
        from agentctl.store.postgres import open_postgres_store

        store = open_postgres_store(
            db_path, migrate_schema=migrate_schema, settings=settings, store_class=Store
        )
    else:
        with ExitStack() as peeking:
            store = _open_file_store(db_path, migrate_schema, settings, create, peeking)
    from agentctl.store import encryption_repo

    try:
        store.use_sealer(encryption_repo.load_sealer(store))
    except BaseException:
        store.close()
        raise
    return store


def _open_file_store(
    db_path: str, migrate_schema: bool, settings: StoreSettings, create: bool, peeking: ExitStack
) -> Store:
    at_head = False
    created = False
    read_only = False
    if db_path != MEMORY:
        path = Path(db_path)
        if path.is_dir():
            raise PersistenceError(
                f"database path {path} is a directory",
                code="store.unreadable",
                hint="pass a file path with --db",
            )
        if path.exists():
            found = peeking.enter_context(migrate.peeked_revision(path))
            migrate.require_known_revision(found, str(path))
            at_head = found == migrate.SCHEMA_HEAD
            read_only = _read_only(path)
            if read_only and not at_head and migrate_schema:
                raise PersistenceError(
                    f"database {path} is read-only and needs an upgrade to this agentctl's "
                    "schema before it can be read",
                    code="store.read_only",
                    hint=f"make it writable (chmod u+w {path}), or read it with the agentctl "
                    "version that wrote it",
                )
        elif not create:
            raise PersistenceError(
                f"no agentctl database at {path}",
                code="store.missing",
                hint="check the --db path (or AGENTCTL_DB); `agentctl roll` creates the "
                "database on its first run",
            )
        else:
            try:
                _create_file(path)
            except OSError as exc:
                raise PersistenceError(
                    f"cannot create database {path}: {exc.strerror}",
                    code="store.unwritable",
                    hint="choose a writable location with --db or AGENTCTL_DB",
                ) from exc
            created = True
    first: sqlite3.Connection | None = None
    if db_path != MEMORY and not created and (at_head or not migrate_schema):
        # While the revision's read-only connection is still open (see
        # migrate.peeked_revision), so the WAL is indexed once: the store's first
        # transaction uses this connection.
        first = _first_connection(db_path, settings, read_only=read_only)
    if db_path == MEMORY:
        store = Store(
            make_engine(
                "sqlite://",
                lambda: connect(
                    ":memory:", settings.synchronous, settings.busy_timeout_ms, wal=False
                ),
                memory=True,
            ),
            db_path,
        )
    else:
        connections = FileConnections(
            db_path,
            settings.synchronous,
            settings.busy_timeout_ms,
            read_only=read_only,
            first=first,
        )
        store = Store(None, db_path, connections)
    try:
        if migrate_schema and not at_head:
            with store.write() as conn:
                current = migrate.current_revision(conn)
                migrate.require_known_revision(current, db_path)
                if current != migrate.head_revision():
                    migrate.upgrade(conn)
        if created:
            # Only files this call created: an operator's chosen mode (0444 to freeze a
            # database, 0640 to share it) is never changed.
            _restrict_modes(Path(db_path))
    except BaseException:
        store.close()
        raise
    return store
