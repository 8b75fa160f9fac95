"""The one translation of database driver errors into agentctl's error hierarchy.

Each error names the database and the cause an operator can act on. Causes that go away by
themselves (another writer holds the lock, a full disk being cleared, a passing I/O error)
carry a code in :data:`TRANSIENT_CODES`; :func:`retry_transient` retries work that must not
be abandoned (the outcome of an effect that already ran) for a bounded time.

Errors are told apart by the codes the databases define, never by their message text:
SQLite's result codes (``sqlite3.Error.sqlite_errorcode``, its extended code: busy, locked,
full, I/O, read-only, corrupt, not a database, and each kind of constraint), PostgreSQL's
SQLSTATE. A write the schema refused (a duplicate key, a reference to a missing record, a
check) is ``store.constraint`` on both.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from agentctl.errors import PersistenceError

__all__ = [
    "TRANSIENT_CODES",
    "driver_error",
    "open_error",
    "retry_transient",
    "retry_window_seconds",
    "sqlite_code",
]

T = TypeVar("T")

# A PostgreSQL server restarting is unreachable for a moment: work that must not be
# abandoned waits for it like for a lock.
TRANSIENT_CODES = frozenset(
    {"store.locked", "store.disk_full", "store.io_error", "store.unreachable"}
)

# SQLite's causes by result code (the primary code, the low byte of the extended code the
# driver gives as ``sqlite_errorcode``), never by the message text: the message is SQLite's
# wording of the moment, the code its interface.
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_CORRUPT = 5, 6, 8, 11
_SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_CONSTRAINT = 10, 13, 14, 19
_SQLITE_NOTADB = 26
# primary code: (code, what it means, next step)
_SQLITE_CODES = {
    _SQLITE_BUSY: (
        "store.locked",
        "is locked by another process",
        "wait for the other agentctl process (or the program holding the database) to "
        "finish, then retry",
    ),
    _SQLITE_LOCKED: (
        "store.locked",
        "is locked by another connection",
        "wait for the other connection holding the database to finish, then retry",
    ),
    _SQLITE_FULL: (
        "store.disk_full",
        "cannot grow: the disk (or a file-size limit) is full",
        "free disk space, then retry",
    ),
    _SQLITE_READONLY: (
        "store.read_only",
        "is read-only",
        "reading commands work on it; to write, make the file and its folder writable",
    ),
    _SQLITE_IOERR: (
        "store.io_error",
        "could not be read or written (I/O error)",
        "check the disk and the file system, then retry",
    ),
    _SQLITE_CORRUPT: (
        "store.corrupt",
        "is damaged",
        "check it with `agentctl db check` and restore it from a backup",
    ),
    _SQLITE_NOTADB: (
        "store.corrupt",
        "is not an SQLite database or is damaged",
        "check the --db path; restore the file from a backup if it is damaged",
    ),
}

# A write the schema refused, by SQLite's extended code or PostgreSQL's SQLSTATE:
# (extended name, SQLSTATE, what it means). Nothing of the transaction was written.
_CONSTRAINTS = (
    ("SQLITE_CONSTRAINT_UNIQUE", "23505", "already holds a record with this key"),
    ("SQLITE_CONSTRAINT_PRIMARYKEY", "23505", "already holds a record with this key"),
    ("SQLITE_CONSTRAINT_FOREIGNKEY", "23503", "holds no record this write refers to"),
    ("SQLITE_CONSTRAINT_CHECK", "23514", "refused a value its schema does not allow"),
    ("SQLITE_CONSTRAINT_NOTNULL", "23502", "refused an empty value its schema requires"),
)
_CONSTRAINT_HINT = (
    "nothing of this write was stored; another process may have written the same record "
    "first: inspect it, then run the command again"
)


def _constraint(where: str, key: str, detail: str) -> PersistenceError:
    meaning = next(
        (meaning for name, state, meaning in _CONSTRAINTS if key in (name, state)),
        "refused a write its schema does not allow",
    )
    return PersistenceError(
        f"database {where} {meaning} ({detail})", code="store.constraint", hint=_CONSTRAINT_HINT
    )


def sqlite_code(exc: BaseException | None) -> tuple[int, str] | None:
    """SQLite's extended result code and its name for a driver error, or None for an
    error SQLite did not report (a closed connection, a misuse of the driver)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return None
    return code, str(getattr(exc, "sqlite_errorname", "") or "")


def driver_error(where: str, exc: BaseException | None) -> PersistenceError:
    if _is_postgres_error(exc):
        return _postgres_error(where, exc)
    text = str(exc)
    found = sqlite_code(exc)
    if found is None:
        return PersistenceError(f"database error on {where}: {text}", code="store.database_error")
    code, name = found
    primary = code & 0xFF
    detail = f"{name}: {text}" if name else text
    if primary in (_SQLITE_CANTOPEN, _SQLITE_READONLY):
        # SQLite says the same for a read-only mount, a missing permission and a folder
        # where its side files cannot be created: the file system tells them apart.
        cause = _file_system_cause(Path(where), detail)
        if cause is not None:
            return cause
    if primary == _SQLITE_CONSTRAINT:
        return _constraint(where, name, detail)
    if primary in _SQLITE_CODES:
        store_code, meaning, hint = _SQLITE_CODES[primary]
        return PersistenceError(
            f"database {where} {meaning} ({detail})", code=store_code, hint=hint
        )
    return PersistenceError(f"database error on {where}: {detail}", code="store.database_error")


_UNREACHABLE_HINT = (
    "check that the PostgreSQL server is running and the URL's host, port, user, password "
    "(or PGPASSWORD, ~/.pgpass) and database name; a server that was restarting answers "
    "again in a moment: retry"
)

# PostgreSQL causes by SQLSTATE (an exact state, or a two-character class), never by the
# message: a server with another ``lc_messages`` words them in its own language.
# (state or class, code, what it means, next step)
_SQLSTATES = (
    ("40001", "store.locked", "was changed by a concurrent writer", "retry the command"),
    ("40P01", "store.locked", "was changed by a concurrent writer (deadlock)", "retry the command"),
    (
        "55P03",
        "store.locked",
        "is locked by another writer",
        "wait for the other agentctl process to finish its transaction, then retry",
    ),
    (
        "57P01",
        "store.unreachable",
        "lost its connection: the server is shutting down or restarting",
        "retry once the server is back (workers retry by themselves)",
    ),
    (
        "57P02",
        "store.unreachable",
        "lost its connection: the server is restarting after a crash",
        "retry once the server is back (workers retry by themselves)",
    ),
    (
        "57P03",
        "store.unreachable",
        "cannot be reached: the server is starting up",
        "retry in a moment",
    ),
    ("08", "store.unreachable", "lost its connection to the server", _UNREACHABLE_HINT),
    (
        "28",
        "store.unreachable",
        "refused the credentials",
        "check the user and password (in the URL, PGPASSWORD or ~/.pgpass)",
    ),
    (
        "3D000",
        "store.unreachable",
        "does not exist on its server",
        "create it first (createdb NAME, or CREATE DATABASE), then run `agentctl db migrate`",
    ),
    (
        "53300",
        "store.unreachable",
        "cannot be reached: the server has too many connections",
        "retry in a moment, or raise the server's max_connections",
    ),
    (
        "53100",
        "store.disk_full",
        "cannot grow: the server's disk is full",
        "free disk space on the database server, then retry",
    ),
    (
        "58030",
        "store.io_error",
        "could not be read or written (I/O error on the server)",
        "check the server's disk, then retry",
    ),
    (
        "25006",
        "store.read_only",
        "is read-only (a standby, or default_transaction_read_only)",
        "point --db at the primary server",
    ),
)


_SQLSTATES_BY_KEY = {key: (meaning, hint) for key, _code, meaning, hint in _SQLSTATES}


def _is_postgres_error(exc: BaseException | None) -> bool:
    return exc is not None and type(exc).__module__.split(".")[0] == "psycopg"


def _postgres_error(where: str, exc: BaseException | None) -> PersistenceError:
    """A psycopg error by its SQLSTATE. One without a state is the driver's own: an
    ``OperationalError`` then means the connection failed or was lost (refused, the server
    gone mid-use, a connection already closed), which is transient like a restart."""
    text = str(exc).strip()
    state = getattr(exc, "sqlstate", None) or ""
    if state[:2] == "23":
        return _constraint(where, state, f"SQLSTATE {state}: {text}")
    for key, code, meaning, hint in _SQLSTATES:
        if state == key or (len(key) == 2 and state[:2] == key):
            return PersistenceError(
                f"database {where} {meaning} (SQLSTATE {state}: {text})", code=code, hint=hint
            )
    if not state and _is_operational(exc):
        hint = _UNREACHABLE_HINT
        if "does not exist" in text and "database" in text:
            # Only a better hint: the code is the same whatever the server's language.
            hint = _SQLSTATES_BY_KEY["3D000"][1]
        return PersistenceError(
            f"database {where} cannot be reached ({text})", code="store.unreachable", hint=hint
        )
    detail = f"SQLSTATE {state}: {text}" if state else text
    return PersistenceError(f"database error on {where}: {detail}", code="store.database_error")


def _is_operational(exc: BaseException | None) -> bool:
    return any(
        kind.__name__ == "OperationalError" and kind.__module__.startswith("psycopg")
        for kind in type(exc).__mro__
    )


def open_error(path: Path, exc: BaseException) -> PersistenceError:
    """Why an existing database file could not be read when it was first opened."""
    found = sqlite_code(exc)
    if found is not None and found[0] & 0xFF == _SQLITE_NOTADB:
        if _has_sqlite_header(path):
            return PersistenceError(
                f"database {path} is damaged: it starts like an SQLite database but its "
                f"pages cannot be read ({exc})",
                code="store.corrupt",
                hint="keep this file (it may be partly recoverable with `sqlite3 "
                f"{path.name} .recover`) and restore the database from a backup",
            )
        return PersistenceError(
            f"{path} is not an SQLite database ({exc})",
            code="store.not_a_database",
            hint="pass the path of an agentctl database with --db (this file was not changed)",
        )
    return driver_error(str(path), exc)


def _has_sqlite_header(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _file_system_cause(path: Path, text: str) -> PersistenceError | None:
    if not path.is_absolute() or not path.exists():
        return None
    folder = path.parent
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    try:
        read_only_mount = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only_mount = False
    if read_only_mount:
        message = f"database {path} is on a read-only file system"
        if wal.exists() and not shm.exists():
            message += (
                f", and its write-ahead log {wal.name} can only be read through a "
                f"{shm.name} file that cannot be created there"
            )
        return PersistenceError(
            f"{message} ({text})",
            code="store.read_only",
            hint="remount the file system read-write, or copy the database (with its -wal "
            "file) to a writable folder and pass the copy with --db",
        )
    if not os.access(path, os.R_OK) or (
        not shm.exists() and wal.exists() and not os.access(folder, os.W_OK)
    ):
        return PersistenceError(
            f"database {path} cannot be opened: permission denied ({text})",
            code="store.permission",
            hint=f"give your user read access to {path.name} and write access to its folder, "
            "or run agentctl as the user that owns them",
        )
    return None


def retry_window_seconds() -> float:
    """How long work that must not be abandoned is retried (``AGENTCTL_STORE_RETRY_SECONDS``,
    default 120 s)."""
    try:
        return max(0.0, float(os.environ.get("AGENTCTL_STORE_RETRY_SECONDS", "120")))
    except ValueError:
        return 120.0


def retry_transient(work: Callable[[], T], *, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``work``, retrying transient store errors with backoff within the retry window;
    the last error is raised when the window closes."""
    deadline = time.monotonic() + retry_window_seconds()
    delay = 0.05
    while True:
        try:
            return work()
        except PersistenceError as exc:
            if exc.code not in TRANSIENT_CODES or time.monotonic() + delay > deadline:
                raise
        sleep(delay)
        delay = min(delay * 2, 2.0)
