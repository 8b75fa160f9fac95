"""A SQLite store's connections: opened at the driver with every pragma, and the
SQLAlchemy engine made over them only when something asks for it.

A run's claim, task transitions and completion go through
:meth:`~agentctl.store.engine.Store.driver_session` alone, so a process that opens a
database to resume or finish one run never pays for the engine's set-up (dialect, pool,
events). The engine, once made, takes the idle connections first; until then
:class:`FileConnections` keeps them itself.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agentctl.store.dialect import SQLITE, WRITE, begin_statement
from agentctl.store.location import MEMORY

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = [
    "SQLITE_DRIVER",
    "FileConnections",
    "address",
    "connect",
    "make_engine",
    "read_only_uri",
]


class _SqliteDriver:
    """What a :class:`~agentctl.store.engine.DriverSession` on SQLite tells of its
    dialect (``store.dialect.dialect_name`` reads the name)."""

    name = "sqlite"


SQLITE_DRIVER = _SqliteDriver()


def address(path: str, read_only: bool) -> tuple[str, str]:
    """The engine's URL (it picks the dialect and the pool) and the driver's target."""
    if path == MEMORY:
        return "sqlite://", ":memory:"
    if read_only:
        # On a read-only file system SQLite cannot create the shared-memory file a WAL
        # database needs even for reading; nothing can change the file there, so it is
        # read as immutable. The same holds for a read-only file in a folder the operator
        # made read-only (no write bits): reading must not create side files there, and no
        # writer can run in it. A write-ahead log with content is never ignored, though.
        file = Path(path)
        immutable = _read_only_file_system(file) or (
            _read_only_folder(file) and not _wal_has_content(file)
        )
        target = read_only_uri(file, immutable=immutable)
        return f"sqlite:///{target}&uri=true", target
    return f"sqlite:///{path}", os.path.abspath(path)


def read_only_uri(path: Path, *, immutable: bool) -> str:
    """The driver's URI that opens ``path`` read-only; ``immutable`` also tells SQLite that
    nothing can change the file, so it neither looks for nor creates a WAL beside it."""
    return f"file:{quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")


def _read_only_folder(path: Path) -> bool:
    """The folder has no write bit (mode bits, so root is judged like any user)."""
    try:
        return (path.resolve().parent.stat().st_mode & 0o222) == 0
    except OSError:
        return False


def _wal_has_content(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


#: The write-ahead log's automatic checkpoint, in pages (SQLite's default is 1,000). It
#: bounds what a killed process leaves in the log, which the next process to open the
#: database reads in full before its first statement (docs/performance.md).
WAL_AUTOCHECKPOINT_PAGES = 500

#: The size, in bytes, the log file is cut back to when SQLite starts it over after a
#: checkpoint (it is otherwise never shrunk: a run's creation can grow it to many times
#: the checkpoint size, and that file then stays beside the database).
JOURNAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024


def connect(
    target: str, synchronous: str, busy_timeout_ms: int, *, wal: bool
) -> sqlite3.Connection:
    """One connection of the store, every pragma set. Autocommit at the driver: the
    engine's "begin" event and ``DriverSession`` issue BEGIN themselves."""
    conn = sqlite3.connect(
        target, uri=target.startswith("file:"), check_same_thread=False, isolation_level=None
    )
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA wal_autocheckpoint={int(WAL_AUTOCHECKPOINT_PAGES)}")
            conn.execute(f"PRAGMA journal_size_limit={int(JOURNAL_SIZE_LIMIT_BYTES)}")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    except BaseException:
        conn.close()
        raise
    return conn


def make_engine(url: str, creator: Callable[[], sqlite3.Connection], *, memory: bool) -> Engine:
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import StaticPool

    engine = create_engine(url, creator=creator, **({"poolclass": StaticPool} if memory else {}))

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        kind = conn.get_execution_options().get("agentctl_begin", WRITE)
        conn.exec_driver_sql(begin_statement(SQLITE, kind))

    return engine


class FileConnections:
    """The connections of one database file, at the driver or through the engine."""

    def __init__(
        self,
        path: str,
        synchronous: str,
        busy_timeout_ms: int,
        *,
        read_only: bool,
        first: sqlite3.Connection | None,
    ) -> None:
        self._url, self._target = address(path, read_only)
        self._pragmas = (synchronous, busy_timeout_ms)
        self._wal = not read_only
        self._idle: list[sqlite3.Connection] = [first] if first is not None else []
        self._engine: Engine | None = None
        self._making = threading.Lock()
        self._closed = False

    def _take(self) -> sqlite3.Connection:
        try:
            return self._idle.pop()
        except IndexError:
            return connect(self._target, *self._pragmas, wal=self._wal)

    def engine(self) -> Engine:
        with self._making:
            if self._engine is None:
                from sqlalchemy import event

                engine = make_engine(self._url, self._take, memory=False)
                # The pool's connections are its own; the idle ones here are closed with
                # it (a test disposes of the engine to see every connection made anew).
                event.listen(engine, "engine_disposed", lambda _engine: self._close_idle())
                self._engine = engine
            return self._engine

    def checkout(self) -> tuple[Any, Callable[[], None]]:
        """A connection and how to give it back: the engine's pool once there is one."""
        if self._engine is not None:
            raw = self._engine.raw_connection()
            return raw, raw.close
        conn = self._take()
        return conn, lambda: self._give_back(conn)

    def _give_back(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.rollback()
        if self._closed:
            conn.close()
        else:
            self._idle.append(conn)

    def _close_idle(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def close(self) -> None:
        self._closed = True
        if self._engine is not None:
            self._engine.dispose()
        self._close_idle()
