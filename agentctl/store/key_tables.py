"""The table of the encryption keys a database's payloads are sealed under
(docs/encryption.md): which variable held each key, never the key itself.
"""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Column, String, Table, Text

from agentctl.store.table_base import metadata, timestamp_column

__all__ = ["encryption_keys"]


# The keys that seal payloads at rest (store/keyring.py, docs/encryption.md): the name of
# the variable that held each key (never the key), the one ``active`` key new values are
# sealed under, and a constant sealed under the key so a wrong key is told from a lost one.
encryption_keys = Table(
    "encryption_keys",
    metadata,
    Column("key_id", String(64), primary_key=True),
    Column("key_env", String(255), nullable=False),
    Column("status", String(10), nullable=False),
    Column("check_value", Text, nullable=False),
    timestamp_column("created_at", nullable=False),
    CheckConstraint("status IN ('active', 'retired')", name="status"),
)
