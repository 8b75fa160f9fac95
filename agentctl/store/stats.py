"""``agentctl db stats``: schema revision, record counts, database and WAL size."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, computed_field
from pydantic.dataclasses import dataclass

from agentctl.store import migrate
from agentctl.store.statements import statement
from agentctl.store.tables import metadata
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import Store

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


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def database_stats(store: Store) -> DatabaseStats:
    with store.read() as conn:
        revision = migrate.current_revision(conn)
        (row,) = _counts.run(conn)
        counts = {table.name: int(count) for table, count in zip(_TABLES, row, strict=True)}
        journal_mode, synchronous, size = _storage_settings.run(conn).first()
    on_disk = size is None and not store.in_memory
    return DatabaseStats(
        path=store.path,
        revision=revision,
        head_revision=migrate.head_revision(),
        counts=dict(sorted(counts.items())),
        database_bytes=int(size) if size is not None else _size(store.path) if on_disk else 0,
        wal_bytes=_size(str(Path(store.path)) + "-wal") if on_disk else 0,
        journal_mode=str(journal_mode),
        synchronous=str(synchronous),
    )


#: Every table of the schema, in the order :func:`_counts` counts them.
_TABLES = tuple(metadata.sorted_tables)


@statement
def _counts(_: SqlDialect) -> Executable:
    from sqlalchemy import func, select

    return select(*(select(func.count()).select_from(t).scalar_subquery() for t in _TABLES))


@statement
def _storage_settings(sql: SqlDialect) -> Executable:
    return sql.storage_settings()
