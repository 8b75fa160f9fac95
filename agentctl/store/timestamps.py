"""The one timestamp codec of the store.

Timestamps are stored as naive UTC text in the form SQLAlchemy's SQLite ``DateTime``
type writes and parses (``YYYY-MM-DD HH:MM:SS.ffffff``), so rows written through the ORM
and through the driver-level hot path compare and sort the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["from_db", "to_db"]


def to_db(value: datetime) -> str:
    """A datetime as stored text (aware values are converted to UTC first)."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def from_db(value: str | datetime | None) -> datetime | None:
    """Stored text (or a driver's datetime) as an aware UTC datetime."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
