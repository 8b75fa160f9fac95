"""SQL fragments shared by the memory indexes: live-entry conditions and metadata filters.

Timestamps are compared as the text SQLAlchemy's SQLite ``DateTime`` stores (UTC, no
zone, microseconds), which sorts chronologically.

Metadata filters are exact matches on canonical JSON: ``metadata_json`` is stored
canonically, SQLite's ``->`` operator returns the stored JSON text of one member, and the
filter value is serialized the same way. So ``"a"`` matches only the string ``"a"``,
``1`` does not match ``1.0`` or ``true``, ``null`` matches an explicit null but not a
missing key, and objects match when they are equal as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from agentctl.digest import canonical_json

__all__ = ["db_time", "live_entry_sql"]


def db_time(value: datetime) -> str:
    return value.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def live_entry_sql(
    alias: str, namespace: str, now: datetime, filters: Mapping[str, Any]
) -> tuple[str, list[Any]]:
    """``WHERE`` conditions for unexpired entries of ``namespace`` matching ``filters``."""
    # `+` keeps SQLite off the (namespace, key) index: these conditions filter rows that
    # an FTS match or an id list already selected; walking a whole namespace is slower.
    clauses = [
        f"+{alias}.namespace = ?",
        f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)",
    ]
    params: list[Any] = [namespace, db_time(now)]
    for key in sorted(filters):
        clauses.append(f"({alias}.metadata_json -> ?) = ?")
        params.extend([f'$."{key}"', canonical_json(filters[key])])
    return " AND ".join(clauses), params
