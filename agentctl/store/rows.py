"""Turning driver rows into the plain mappings the repositories hand back.

A repository selects an explicit column list and names it here, so the domain packages
read ``row["status"]`` whichever connection ran the query (a SQLAlchemy connection or the
executor's driver session). Timestamp columns come back as the naive UTC ``datetime`` that
SQLAlchemy's SQLite ``DateTime`` type produced when these reads went through SQLAlchemy
Core, so nothing a reader shows or compares changed when the SQL moved here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from agentctl.store.timestamps import from_db

__all__ = ["columns_sql", "naive", "row_dict", "row_dicts"]


def naive(value: str | datetime | None) -> datetime | None:
    """A stored timestamp as a naive UTC ``datetime`` (None stays None)."""
    if value is None:
        return None
    return from_db(value).replace(tzinfo=None)


def columns_sql(columns: Sequence[str]) -> str:
    return ", ".join(columns)


def row_dict(
    row: Sequence[Any] | None, columns: Sequence[str], times: frozenset[str] = frozenset()
) -> dict[str, Any] | None:
    """``{column: value}`` of one row (None when there is no row)."""
    if row is None:
        return None
    return {
        column: naive(value) if column in times else value
        for column, value in zip(columns, row, strict=True)
    }


def row_dicts(
    rows: Iterable[Sequence[Any]], columns: Sequence[str], times: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in rows:
        mapped = row_dict(row, columns, times)
        assert mapped is not None
        out.append(mapped)
    return out
