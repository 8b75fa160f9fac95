"""The one timestamp codec: how a point in time is stored, read back and shown.

Stored form (``to_db`` / ``from_db``): UTC wall time as text,
``YYYY-MM-DD HH:MM:SS.ffffff`` (always six fractional digits, no zone). It is exactly what
SQLAlchemy's SQLite ``DateTime`` type writes and parses, so rows written through the
driver and through SQLAlchemy Core read back alike, and text comparison in SQL
(``expires_at <= ?``) orders the same way the instants do. An aware value is converted
to UTC first; a naive value is taken to be UTC already (SQLite hands stored values back
without a zone).

Read form: ``from_db`` always returns an aware UTC ``datetime`` — from stored text, or
from the naive ``datetime`` a SQLAlchemy column hands back.

Shown form (``to_iso``): ISO 8601 in UTC with a ``Z`` (``2026-01-01T12:00:00Z``), for
JSON documents and effect inputs.

This module imports nothing heavy: any package may use it without pulling in SQLAlchemy.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

__all__ = ["from_db", "to_db", "to_iso", "utc"]

_DB_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime (a naive value is UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


@overload
def to_db(value: datetime) -> str: ...
@overload
def to_db(value: None) -> None: ...
def to_db(value: datetime | None) -> str | None:
    """The stored text of ``value`` (None stays None)."""
    if value is None:
        return None
    found = _TEXTS.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    zone = value.tzinfo
    # isoformat with a space and microseconds is exactly _DB_FORMAT, at a fraction of
    # strftime's cost (this runs several times per task transition).
    if zone is UTC:
        text = value.isoformat(" ", "microseconds")[:-6]  # without its "+00:00"
    elif zone is None:
        text = value.isoformat(" ", "microseconds")
    else:
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    if len(_TEXTS) >= _KEEP:
        _TEXTS.clear()
    _TEXTS[id(value)] = (value, text)
    return text


#: The texts of the UTC and naive datetimes :func:`to_db` wrote lately, by the datetime
#: object (its ``id``, the object kept with its text so that the id stays its own): a
#: task transition stamps its task row, checkpoint and audit event with one ``now``, and
#: a batch's rows are written together at its end, so each ``now`` is formatted once
#: rather than three or four times. By identity, not by value: hashing an aware
#: datetime (its offset asked for, a naive copy hashed) cost more than formatting it.
#: Other zones are converted every time.
_TEXTS: dict[int, tuple[datetime, str]] = {}
_KEEP = 1024


@overload
def from_db(value: str | datetime) -> datetime: ...
@overload
def from_db(value: None) -> None: ...
def from_db(value: str | datetime | None) -> datetime | None:
    """The aware UTC datetime of a stored value (text or a driver's datetime)."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return utc(parsed)


@overload
def to_iso(value: datetime) -> str: ...
@overload
def to_iso(value: None) -> None: ...
def to_iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z``, for JSON (None stays None)."""
    if value is None:
        return None
    return utc(value).isoformat().replace("+00:00", "Z")
