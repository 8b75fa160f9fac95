"""The table of long-term memory (docs/memory.md): one entry per namespace and key, with
its searchable text, metadata, embedding, retention and provenance.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from agentctl.store.table_base import format_version_column, metadata, timestamp_column

__all__ = ["memory_entries"]


memory_entries = Table(
    "memory_entries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    format_version_column(),
    Column("namespace", String(255), nullable=False),
    Column("key", String(512), nullable=False),
    Column("value_type", String(10), nullable=False),
    Column("value_json", Text, nullable=False),
    Column("text", Text, nullable=True),
    Column("metadata_json", Text, nullable=False, server_default="{}"),
    Column("embedding", LargeBinary, nullable=True),
    Column("embedding_model", String(255), nullable=True),
    Column("provenance_json", Text, nullable=True),
    timestamp_column("created_at", nullable=False),
    timestamp_column("updated_at", nullable=False),
    timestamp_column("expires_at"),
    # Encryption on (docs/encryption.md): ``text`` holds keyed tokens, this the sealed text.
    Column("text_sealed", Text, nullable=True),
    CheckConstraint("value_type IN ('text', 'json')", name="value_type"),
    UniqueConstraint("namespace", "key"),
    Index(None, "expires_at"),
)
