"""The blob listing of ``agentctl artifacts list --blobs``: one row per stored blob with
how many refs point at it and how many unexpired ingestion leases protect it.

One query with correlated counts over the indexed ``blob_digest`` columns, so the listing
costs one pass over ``artifact_blobs`` however many refs and leases there are.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.statements import statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

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
    rows = _blob_rows.run(conn, now=_stamp(now))
    return [BlobRow(str(r[0]), int(r[1]), r[2], r[3], int(r[4]), int(r[5])) for r in rows]


def live_lease_counts(conn: SqlRunner, now: datetime) -> dict[str, int]:
    """Digest -> unexpired leases naming it (a lease may name bytes that have no row yet)."""
    rows = _live_lease_counts.run(conn, now=_stamp(now))
    return {str(r[0]): int(r[1]) for r in rows}


@statement
def _blob_rows(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.artifact_tables import artifact_blobs, artifact_leases, artifact_refs

    b, r, lease = artifact_blobs.alias("b"), artifact_refs.alias("r"), artifact_leases.alias("l")
    refs = select(func.count()).where(r.c.blob_digest == b.c.digest).scalar_subquery()
    leases = (
        select(func.count())
        .where(lease.c.blob_digest == b.c.digest, lease.c.expires_at > bindparam("now"))
        .scalar_subquery()
    )
    return select(
        b.c.digest, b.c.size_bytes, b.c.media_type, b.c.created_at, refs, leases
    ).order_by(b.c.created_at, b.c.digest)


@statement
def _live_lease_counts(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.artifact_tables import artifact_leases

    c = artifact_leases.c
    return (
        select(c.blob_digest, func.count())
        .where(c.expires_at > bindparam("now"), c.blob_digest.is_not(None))
        .group_by(c.blob_digest)
    )
