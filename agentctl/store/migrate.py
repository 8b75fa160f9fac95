"""Alembic inside the package: locate the shipped revisions, read and check revisions.

Users never run ``alembic`` by hand: the store upgrades a database on open and
``agentctl db migrate`` does it explicitly. A database at a revision this code does not
know was written by a newer agentctl and is refused, never opened, migrated or downgraded.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from agentctl.errors import NewerSchemaError, PersistenceError
from agentctl.store.errors import open_error
from agentctl.store.sqlite_connections import read_only_uri

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection

__all__ = [
    "alembic_config",
    "downgrade",
    "head_revision",
    "known_revisions",
    "migrations_dir",
    "peek_revision",
    "peeked_revision",
    "require_known_revision",
    "upgrade",
]


def migrations_dir() -> Path:
    """The revisions shipped as ``agentctl._migrations`` (``migrations/`` in the source tree)."""
    spec = importlib.util.find_spec("agentctl._migrations")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if (Path(location) / "env.py").is_file():
                return Path(location)
    source_tree = Path(__file__).resolve().parents[2] / "migrations"
    if (source_tree / "env.py").is_file():
        return source_tree
    raise PersistenceError(
        "agentctl's database migrations are missing from this installation",
        code="store.migrations_missing",
        hint="reinstall agentctl (pip install --force-reinstall agentctl)",
    )


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


#: The newest revision shipped. Opening a database already at it needs no Alembic import;
#: a test keeps this equal to the head of the revision files.
SCHEMA_HEAD = "0017_hot_updates"


def known_revisions() -> frozenset[str]:
    return frozenset(rev.revision for rev in _script().walk_revisions())


def head_revision() -> str:
    heads = _script().get_heads()
    if len(heads) != 1:
        raise PersistenceError(f"migration history has {len(heads)} heads: {sorted(heads)}")
    return heads[0]


def peek_revision(path: Path) -> str | None:
    """Read a database's revision without changing a byte of it (read-only, no pragmas)."""
    with peeked_revision(path) as revision:
        return revision


@contextmanager
def peeked_revision(path: Path) -> Iterator[str | None]:
    """:func:`peek_revision`, with its read-only connection held open until the block ends.

    A read-only connection to a WAL database creates its ``-wal`` and ``-shm`` files when
    they are missing (and cannot remove them afterwards). When neither exists, nothing
    holds the database open in WAL mode, so the main file is complete and is read as
    immutable: a database this code refuses is left exactly as it was, with no new files.

    When they exist (a process holds the database, or one was killed), this read rebuilds
    the WAL's index in the shared-memory file if nobody holds it: a read of every frame
    since the last checkpoint, up to 4 MB. SQLite rebuilds it in whichever connection finds
    no other one open, so the store opens its own first connection inside this block, and
    the WAL is read once instead of twice.
    """
    quiet = not any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
    try:
        conn = sqlite3.connect(read_only_uri(path, immutable=quiet), uri=True)
    except sqlite3.Error as exc:
        raise open_error(path, exc) from exc
    try:
        try:
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
            ).fetchone()
            row = (
                conn.execute("SELECT version_num FROM alembic_version").fetchone()
                if has_table
                else None
            )
        except sqlite3.DatabaseError as exc:
            # Only "file is not a database" means that; a lock, a read-only mount, a missing
            # permission or damage is named as what it is (and the file is never blamed).
            raise open_error(path, exc) from exc
        yield str(row[0]) if row else None
    finally:
        conn.close()


def require_known_revision(revision: str | None, where: str) -> None:
    """Refuse a database written by a newer agentctl (exit 5)."""
    if revision is None or revision == SCHEMA_HEAD or revision in known_revisions():
        return
    from agentctl.version import __version__

    raise NewerSchemaError(
        f"database {where} is at schema revision {revision!r}, which this agentctl "
        f"({__version__}) does not know; the newest it knows is {head_revision()!r}",
        hint="it was written by a newer agentctl: upgrade agentctl to open it; "
        "the database was left unchanged",
    )


def current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, target: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(connection), target)


def downgrade(connection: Connection, target: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(connection), target)
