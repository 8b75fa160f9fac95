"""``agentctl db stats``: schema revision, record counts, database and WAL size."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, computed_field
from pydantic.dataclasses import dataclass
from sqlalchemy import func, select

from agentctl.store import migrate
from agentctl.store.dialect import is_postgres
from agentctl.store.runner import Store
from agentctl.store.tables import metadata
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

__all__ = ["DatabaseStats", "database_stats"]


@dataclass(frozen=True, slots=True, config=CAMEL)
class DatabaseStats(CamelRecord):
    """What ``db stats`` shows."""

    path: str
    revision: Annotated[str | None, Field(alias="schemaRevision")]
    head_revision: str
    counts: dict[str, int]
    database_bytes: int
    wal_bytes: int
    journal_mode: str
    synchronous: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def up_to_date(self) -> bool:
        return self.revision == self.head_revision

    _order = keys_in_order("path", "schemaRevision", "headRevision", "upToDate")


_SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def database_stats(store: Store) -> DatabaseStats:
    with store.read() as conn:
        revision = migrate.current_revision(conn)
        counts = {
            table.name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
            for table in metadata.sorted_tables
        }
        if is_postgres(conn):
            # PostgreSQL's own write-ahead log; its size is the server's business.
            size = int(
                conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one()
            )
            commit = str(conn.exec_driver_sql("SHOW synchronous_commit").scalar_one())
            return DatabaseStats(
                path=store.path,
                revision=revision,
                head_revision=migrate.head_revision(),
                counts=dict(sorted(counts.items())),
                database_bytes=size,
                wal_bytes=0,
                journal_mode="postgresql",
                synchronous=commit.upper(),
            )
        journal_mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one())
        sync_value = int(conn.exec_driver_sql("PRAGMA synchronous").scalar_one())
    in_memory = store.in_memory
    return DatabaseStats(
        path=store.path,
        revision=revision,
        head_revision=migrate.head_revision(),
        counts=dict(sorted(counts.items())),
        database_bytes=0 if in_memory else _size(store.path),
        wal_bytes=0 if in_memory else _size(str(Path(store.path)) + "-wal"),
        journal_mode=journal_mode,
        synchronous=_SYNCHRONOUS_NAMES.get(sync_value, str(sync_value)),
    )
