"""The blob listing of ``agentctl artifacts list --blobs``: one row per stored blob with
how many refs point at it and how many unexpired ingestion leases protect it.

One query with correlated counts over the indexed ``blob_digest`` columns, so the listing
costs one pass over ``artifact_blobs`` however many refs and leases there are.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["BlobRow", "blob_rows", "live_lease_counts"]


@dataclass(frozen=True, slots=True)
class BlobRow:
    digest: str
    size: int
    media_type: str | None
    created_at: Any  # the stored timestamp, as the driver returns it
    refs: int
    live_leases: int


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def blob_rows(conn: SqlRunner, now: datetime) -> list[BlobRow]:
    """Every blob row, oldest first, with its ref count and live lease count at ``now``."""
    rows = conn.exec_driver_sql(
        "SELECT b.digest, b.size_bytes, b.media_type, b.created_at, "
        "(SELECT COUNT(*) FROM artifact_refs r WHERE r.blob_digest = b.digest), "
        "(SELECT COUNT(*) FROM artifact_leases l "
        " WHERE l.blob_digest = b.digest AND l.expires_at > ?) "
        "FROM artifact_blobs b ORDER BY b.created_at, b.digest",
        (_stamp(now),),
    )
    return [BlobRow(str(r[0]), int(r[1]), r[2], r[3], int(r[4]), int(r[5])) for r in rows]


def live_lease_counts(conn: SqlRunner, now: datetime) -> dict[str, int]:
    """Digest -> unexpired leases naming it (a lease may name bytes that have no row yet)."""
    rows = conn.exec_driver_sql(
        "SELECT blob_digest, COUNT(*) FROM artifact_leases "
        "WHERE expires_at > ? AND blob_digest IS NOT NULL GROUP BY blob_digest",
        (_stamp(now),),
    )
    return {str(r[0]): int(r[1]) for r in rows}
