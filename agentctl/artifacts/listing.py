"""Every blob in the store, referenced or not: ``agentctl artifacts list --blobs``.

Each blob is reported with its size, age, how many refs point at it, how many live
ingestion leases protect it, whether its file is present, and whether ``artifacts gc``
with the same grace period would remove it now — by the same rules gc applies: a blob is
kept while a ref or a live lease names it or while it is younger than the grace period
(its row's creation time, or the file's modification time for bytes that never got a
row). Files on disk without a row are listed too; they are exactly what gc cleans up.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, PlainSerializer
from pydantic.dataclasses import dataclass

from agentctl.store.timestamps import from_db
from agentctl.typed_records import CAMEL, CamelRecord, IsoDateTime

if TYPE_CHECKING:
    from agentctl.artifacts.store import ArtifactStore

__all__ = ["BlobListing", "list_blobs"]


@dataclass(frozen=True, slots=True, config=CAMEL)
class BlobListing(CamelRecord):
    """One row of ``artifacts list --blobs`` (``recorded``: the blob has a row)."""

    digest: str
    size: int
    media_type: str | None
    created_at: IsoDateTime
    age_seconds: Annotated[float, PlainSerializer(lambda age: round(age, 3), return_type=float)]
    refs: int
    leases: int
    present: bool
    has_row: Annotated[bool, Field(alias="recorded")]
    collectable: bool


def list_blobs(artifacts: ArtifactStore, *, older_than_days: float) -> list[BlobListing]:
    """Every blob (rows and files), oldest first, with what keeps it or lets gc take it."""
    from agentctl.store.blobs_list import blob_rows, live_lease_counts

    now = artifacts.clock.now()
    cutoff = now - timedelta(days=older_than_days)
    with artifacts.store.read() as conn:
        rows = blob_rows(conn, now)
        leases = live_lease_counts(conn, now)
    files = dict(artifacts.layout.iter_blobs())
    out: list[BlobListing] = []

    def add(
        digest: str, size: int, media: str | None, born: datetime, refs: int, row: bool
    ) -> None:
        leased = leases.get(digest, 0)
        out.append(
            BlobListing(
                digest=digest,
                size=size,
                media_type=media,
                created_at=born,
                age_seconds=max(0.0, (now - born).total_seconds()),
                refs=refs,
                leases=leased,
                present=digest in files,
                has_row=row,
                collectable=refs == 0 and leased == 0 and born <= cutoff,
            )
        )

    for row in rows:
        add(row.digest, row.size, row.media_type, from_db(row.created_at), row.refs, True)
    recorded = {row.digest for row in rows}
    for digest, path in sorted(files.items()):
        if digest in recorded:
            continue
        try:
            info = path.stat()
        except OSError:
            continue
        add(digest, info.st_size, None, datetime.fromtimestamp(info.st_mtime, UTC), 0, False)
    out.sort(key=lambda blob: (blob.created_at, blob.digest))
    return out
