"""An open store and what runs SQL on it: :class:`Store` (its ``write()``, ``row_write()``,
``read()`` transactions and the driver sessions it hands out), the :class:`SqlRunner`
protocol every repository takes, and :class:`StoreSettings`. A driver session itself
(statements below SQLAlchemy, for a run's hot path) is :mod:`agentctl.store.driver_sessions`'s.

Opening a store (files, PostgreSQL URLs, upgrades) is :mod:`agentctl.store.engine`'s, and
the PostgreSQL engine's set-up :mod:`agentctl.store.postgres`'s; both build on this
module, which imports neither, so the repositories and the sealing modules can name these
types without importing the module that opens stores (and the repositories it loads).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from agentctl.errors import PersistenceError
from agentctl.store import migrate
from agentctl.store.dialect import POSTGRESQL, READ, ROW_LOCKS
from agentctl.store.driver_sessions import DriverSession, OneStatement, ReadEach, driver_errors
from agentctl.store.errors import driver_error
from agentctl.store.keyring import CLEAR, Sealer
from agentctl.store.location import MEMORY
from agentctl.store.locks import Locks, RunFence
from agentctl.store.sealing import SEALER_OPTION
from agentctl.store.sqlite_connections import SQLITE_DRIVER, FileConnections

__all__ = ["SqlRunner", "Store", "StoreSettings"]

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

#: libpq's ``PQTRANS_IDLE``: no transaction open on the connection.
_IDLE = 0

#: How long a store keeps an idle PostgreSQL connection out of the pool between driver
#: sessions, and how many it keeps (see ``Store._server_connection``). Below the pool's
#: ping threshold (store/postgres.py, ``PING_AFTER_IDLE_SECONDS``).
KEEP_SECONDS = 1.0
KEEP_CONNECTIONS = 8

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
                yield OneStatement(conn)
            return
        with self.driver_session() as session:
            yield OneStatement(session)

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
        except driver_errors() as exc:  # a server that cannot be reached: store.unreachable
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
        return ReadEach(self)

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
