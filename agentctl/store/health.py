"""Database health: SQLite's own checks, a marker for known damage, WAL checkpoints.

``agentctl db check`` runs ``PRAGMA integrity_check`` and ``PRAGMA foreign_key_check``
(the engine adds the audit chains and the artifact bytes). When it finds damage it leaves a
marker file beside the database (``<db>.damaged``); runs are then refused before anything
is created or executed, because a write to a damaged file can spread the damage. A later
``db check`` that finds the database sound removes the marker.

A PostgreSQL database has no file: its pages are the server's to check (``amcheck``), so
the SQLite checks report it sound, no marker is written, and there is no WAL to copy.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentctl.errors import PersistenceError
from agentctl.store.statements import statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = [
    "SqliteCheck",
    "checkpoint_wal",
    "clear_damage",
    "damage_marker",
    "mark_damaged",
    "require_undamaged",
    "sqlite_check",
    "wal_frames",
]


@dataclass(frozen=True, slots=True)
class SqliteCheck:
    integrity: list[str] = field(default_factory=list)
    foreign_keys: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.integrity == ["ok"] and not self.foreign_keys


def sqlite_check(store: Any) -> SqliteCheck:
    if _is_url(store.path):
        return SqliteCheck(integrity=["ok"])
    with store.read() as conn:
        integrity = [str(row[0]) for row in _integrity_check.run(conn)]
        foreign = [f"{row[0]} row {row[1]} -> {row[2]}" for row in _foreign_key_check.run(conn)]
    return SqliteCheck(integrity=integrity, foreign_keys=foreign)


# SQLite's own checks, run on SQLite files only (a PostgreSQL database has none of them).


@statement
def _integrity_check(_: SqlDialect) -> Executable:
    from sqlalchemy import text

    return text("PRAGMA integrity_check")


@statement
def _foreign_key_check(_: SqlDialect) -> Executable:
    from sqlalchemy import text

    return text("PRAGMA foreign_key_check")


def damage_marker(db_path: str) -> Path:
    return Path(db_path + ".damaged")


def _is_url(db_path: str) -> bool:
    return "://" in str(db_path)  # callers may hold a Path


def mark_damaged(db_path: str, findings: list[str]) -> None:
    if _is_url(db_path):
        return
    marker = damage_marker(db_path)
    fd = os.open(marker, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("\n".join(findings[:50]) + "\n")


def clear_damage(db_path: str) -> None:
    if _is_url(db_path):
        return
    damage_marker(db_path).unlink(missing_ok=True)


def require_undamaged(db_path: str) -> None:
    """Refuse (exit 5) to start or continue a run on a database known to be damaged."""
    if db_path == ":memory:" or _is_url(db_path):
        return
    marker = damage_marker(db_path)
    if marker.is_file():
        first = marker.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
        raise PersistenceError(
            f"database {db_path} is known to be damaged ({first[0] if first else 'see '}"
            f"{'' if first else str(marker)}); no run is started on it",
            code="store.damaged",
            hint=f"restore it from a backup, then run `agentctl db check --db {db_path}` "
            "(which clears the mark when the database is sound)",
        )


def checkpoint_wal(store: Any) -> None:
    """Copy the WAL into the main file without waiting for readers (PASSIVE), so a copy of
    the database file alone holds every state a run parked or finished with. At the
    driver: a process that only ran a run makes no SQLAlchemy engine for this."""
    if getattr(store, "in_memory", False) or _is_url(store.path):
        return
    try:
        with store.driver_session() as session:
            session.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
    except Exception:  # noqa: BLE001 - best effort; the WAL is durable either way
        return


def wal_frames(db_path: str | Path) -> int:
    """The frames of a SQLite database's write-ahead log that the next process to open it
    reads back before its first statement (SQLite's recovery of the log's index): those of
    the log's current generation (the salts of its header), up to the last commit frame.
    Read from the file alone: opening the database would rebuild or checkpoint the log."""
    try:
        data = Path(f"{db_path}-wal").read_bytes()
    except OSError:
        return 0
    if len(data) < 32:
        return 0
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    frames = last_commit = 0
    for offset in range(32, len(data) - 24 - page_size + 1, 24 + page_size):
        if data[offset + 8 : offset + 16] != salts:
            break
        frames += 1
        if struct.unpack(">I", data[offset + 4 : offset + 8])[0]:  # a commit's frame
            last_commit = frames
    return last_commit
