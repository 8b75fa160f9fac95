"""Where the database lives: ``--db``, else ``$AGENTCTL_DB``, else ``.agentctl/runtime.db``.

The value is a SQLite file path or a database URL. A URL is recognised by its scheme
(``name://``) and is never treated as a file: ``postgresql://`` (or ``postgres://``) selects
the PostgreSQL store, ``sqlite:///path`` is the SQLite file at ``path``, and any other
scheme is refused before anything is created.

Kept free of SQLAlchemy so the CLI can resolve paths without importing it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from urllib.parse import unquote, urlsplit

from agentctl.errors import PersistenceError, UsageError

__all__ = [
    "DEFAULT_DB",
    "MEMORY",
    "POSTGRES_SCHEMES",
    "SUPPORTED_SCHEMES",
    "artifact_root",
    "is_postgres_url",
    "resolve_db_path",
    "state_directory",
]

DEFAULT_DB = Path(".agentctl") / "runtime.db"
MEMORY = ":memory:"

#: URL schemes naming a PostgreSQL database (the ``+psycopg`` form is SQLAlchemy's).
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
SUPPORTED_SCHEMES = ("sqlite", *POSTGRES_SCHEMES)

# A scheme is a letter then letters, digits, "+", "-" or "."; "://" marks a URL. A bare
# "name:" without slashes stays a file name (SQLite accepts such names).
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_postgres_url(db: str | os.PathLike[str]) -> bool:
    """Whether ``db`` names a PostgreSQL database (a path, even a ``Path``, never does)."""
    if not isinstance(db, str):
        return False
    match = _URL.match(db)
    return bool(match) and match.group(1).lower() in POSTGRES_SCHEMES  # type: ignore[union-attr]


def resolve_db_path(db: str | os.PathLike[str] | None, *, cwd: Path | None = None) -> str:
    """The database path or URL to use; ``:memory:`` passes through untouched."""
    chosen: str | os.PathLike[str] | None = db or os.environ.get("AGENTCTL_DB") or None
    if chosen is None:
        chosen = DEFAULT_DB
    if str(chosen) == MEMORY:
        return MEMORY
    match = _URL.match(str(chosen))
    if match:
        scheme = match.group(1).lower()
        if scheme in POSTGRES_SCHEMES:
            return str(chosen)
        if scheme != "sqlite":
            raise UsageError(
                f"database URL scheme {match.group(1)!r} is not supported "
                f"(supported: {', '.join(s + '://' for s in SUPPORTED_SCHEMES)})",
                code="store.unsupported_url",
                hint="pass a SQLite file path or a postgresql://user@host/dbname URL "
                "with --db or AGENTCTL_DB",
            )
        chosen = _sqlite_url_path(str(chosen))
        if chosen == MEMORY:
            return MEMORY
    path = Path(chosen).expanduser()
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    _check_db_file(path)
    return str(path)


def _sqlite_url_path(url: str) -> str:
    """The file of ``sqlite:///relative`` or ``sqlite:////absolute`` (SQLAlchemy's form)."""
    parts = urlsplit(url)
    if parts.netloc:
        raise UsageError(
            f"database URL {url!r} names a host; a SQLite URL names a file",
            code="store.unsupported_url",
            hint="write sqlite:///relative/path.db or sqlite:////absolute/path.db",
        )
    path = unquote(parts.path)[1:] if parts.path.startswith("/") else unquote(parts.path)
    if not path:
        return MEMORY
    return path


def _check_db_file(path: Path) -> None:
    """Refuse, before SQLite touches it, a path that cannot be a database file: a name too
    long for the file system, or an existing FIFO, socket, device or directory (opening a
    FIFO would block forever waiting for a writer)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.EACCES:
            raise PersistenceError(
                f"database {path} cannot be reached: permission denied on a folder of its path",
                code="store.permission",
                hint="give your user access to the folders on the path (or run agentctl as "
                "their owner), or pass another --db",
            ) from exc
        if exc.errno == errno.ENAMETOOLONG:
            raise UsageError(
                f"database path {str(path)[:80]}… is too long for the file system "
                f"({len(os.fsencode(path.name))} bytes in its last part)",
                code="store.path_too_long",
                hint="choose a shorter --db path (at most 255 bytes per name)",
            ) from exc
        return  # missing (created on open) or unreadable (reported on open)
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise UsageError(
            f"database path {path} is {kind}",
            code="store.not_a_file",
            hint="pass the path of a database file (or of one to create) with --db",
        )


def artifact_root(db_path: str) -> Path | None:
    """The content-addressed artifact store lives in ``artifacts/`` beside the database.

    A PostgreSQL database has no folder: its artifacts live under ``$AGENTCTL_ARTIFACT_ROOT``
    (a directory every process using that database must share), else
    ``.agentctl/artifacts`` in the working directory.
    """
    if db_path == MEMORY:
        return None
    if is_postgres_url(db_path):
        chosen = os.environ.get("AGENTCTL_ARTIFACT_ROOT")
        root = Path(chosen).expanduser() if chosen else Path(".agentctl") / "artifacts"
        return root if root.is_absolute() else Path.cwd() / root
    return Path(db_path).parent / "artifacts"


def state_directory(db_path: str) -> Path:
    """Where the processes using this database keep their own files (the daemon's and the
    dashboard's child logs): the database file's folder, or for a database URL (which has
    no folder, and whose text holds a host, a user, maybe a password) ``.agentctl`` in the
    working directory, where the default database lives."""
    if db_path != MEMORY and not is_postgres_url(db_path):
        return Path(db_path).resolve().parent
    return Path.cwd() / DEFAULT_DB.parent
