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
from contextlib import ExitStack
from pathlib import Path

from agentctl.errors import PersistenceError
from agentctl.store import migrate
from agentctl.store.driver_sessions import DriverSession
from agentctl.store.errors import driver_error
from agentctl.store.location import MEMORY, is_postgres_url
from agentctl.store.runner import SqlRunner, Store, StoreSettings
from agentctl.store.sqlite_connections import FileConnections, address, connect, make_engine

# The types of an open store live in store/runner.py (the repositories name them without
# importing this module); they stay importable from here.
__all__ = ["DriverSession", "SqlRunner", "Store", "StoreSettings", "open_store"]


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

        store = open_postgres_store(db_path, migrate_schema=migrate_schema, settings=settings)
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
