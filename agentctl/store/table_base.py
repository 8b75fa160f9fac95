"""What every table shares: the one ``MetaData`` they register on, its constraint naming
convention, and the column types and helpers the table modules use.

The tables themselves are defined by concept in ``store/*_tables.py``. Whoever reads the
schema as a whole (Alembic, ``db stats``, the encryption walk, the record-format check)
imports ``metadata`` from ``store/tables.py``, which loads every table module first: the
object here holds only the tables whose modules have been imported so far.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Column, DateTime, Integer, MetaData, SmallInteger

__all__ = ["FLAG", "NAMING_CONVENTION", "format_version_column", "metadata", "timestamp_column"]

#: A flag is 0/1 on both dialects (SQLite has no boolean type; the driver-level SQL writes
#: and compares integers, which a PostgreSQL BOOLEAN column would refuse).
FLAG = Boolean().with_variant(SmallInteger(), "postgresql")


NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def timestamp_column(name: str, nullable: bool = True) -> Column[datetime]:
    return Column(name, DateTime(timezone=True), nullable=nullable)


def format_version_column() -> Column[int]:
    return Column("format_version", Integer, nullable=False, server_default="1")
