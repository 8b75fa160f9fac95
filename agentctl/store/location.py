"""Where the database lives: ``--db``, else ``$AGENTCTL_DB``, else ``.agentctl/runtime.db``.

Kept free of SQLAlchemy so the CLI can resolve paths without importing it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from agentctl.errors import PersistenceError, UsageError

__all__ = ["DEFAULT_DB", "MEMORY", "artifact_root", "resolve_db_path"]

DEFAULT_DB = Path(".agentctl") / "runtime.db"
MEMORY = ":memory:"


def resolve_db_path(db: str | os.PathLike[str] | None, *, cwd: Path | None = None) -> str:
    """The database path to use; ``:memory:`` passes through untouched."""
    chosen: str | os.PathLike[str] | None = db or os.environ.get("AGENTCTL_DB") or None
    if chosen is None:
        chosen = DEFAULT_DB
    if str(chosen) == MEMORY:
        return MEMORY
    path = Path(chosen).expanduser()
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    _check_db_file(path)
    return str(path)


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
    """The content-addressed artifact store lives in ``artifacts/`` beside the database."""
    if db_path == MEMORY:
        return None
    return Path(db_path).parent / "artifacts"
