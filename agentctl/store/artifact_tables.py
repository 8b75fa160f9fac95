"""The tables of the content-addressed artifact store (docs/artifacts.md): the blobs, the
names and versions that point at them, and the leases that protect a blob in flight.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from agentctl.store.table_base import format_version_column, metadata, timestamp_column

__all__ = ["artifact_blobs", "artifact_leases", "artifact_refs"]


artifact_blobs = Table(
    "artifact_blobs",
    metadata,
    Column("digest", String(80), primary_key=True),
    Column("size_bytes", Integer().with_variant(BigInteger(), "postgresql"), nullable=False),
    Column("media_type", String(255), nullable=True),
    timestamp_column("created_at", nullable=False),
    timestamp_column("verified_at"),
)

artifact_refs = Table(
    "artifact_refs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    format_version_column(),
    Column(
        "blob_digest",
        String(80),
        ForeignKey("artifact_blobs.digest", ondelete="RESTRICT"),
        nullable=False,
    ),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("name", String(512), nullable=False),
    Column("version", Integer, nullable=False, server_default="1"),
    Column("path", Text, nullable=True),
    Column("definition_fingerprint", String(80), nullable=True),
    Column("input_digest", String(80), nullable=True),
    Column("output_digest", String(80), nullable=True),
    timestamp_column("created_at", nullable=False),
    UniqueConstraint("name", "version"),
    Index(None, "run_id", "task_id"),
    Index(None, "blob_digest"),
)

artifact_leases = Table(
    "artifact_leases",
    metadata,
    Column("id", String(80), primary_key=True),
    # No foreign key: a lease protects a blob while it is being written, before its row exists.
    Column("blob_digest", String(80), nullable=True),
    Column("holder", String(255), nullable=False),
    timestamp_column("created_at", nullable=False),
    timestamp_column("expires_at", nullable=False),
    Index(None, "expires_at"),
    Index(None, "blob_digest"),
)
