"""The artifact catalog as the artifact store sees it: refs, blobs and leases as values.

The rows live in :mod:`agentctl.store.artifacts_repo`; this module turns them into the
values :mod:`agentctl.artifacts.models` hands out and keeps the decisions that are the
artifact store's own (a lapsed lease is not re-pointed; what a digest abbreviation means).
Every function runs inside the caller's transaction, so artifact refs commit together
with the task completion that produced them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from agentctl.artifacts.layout import DIGEST_PREFIX, hex_prefix
from agentctl.artifacts.models import ArtifactRef, LeaseInfo
from agentctl.errors import UsageError
from agentctl.store import artifacts_repo as repo

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "bind_lease",
    "blob_row",
    "insert_blob",
    "insert_leases",
    "insert_ref",
    "latest",
    "lease_row",
    "leases_for",
    "list_refs",
    "live_leases",
    "release_leases",
    "resolve_digest",
]


def _ref(row: repo.RefRow) -> ArtifactRef:
    return ArtifactRef(
        id=row.id,
        digest=row.digest,
        run_id=row.run_id,
        task_id=row.task_id,
        name=row.name,
        version=row.version,
        path=row.path,
        size=row.size,
        definition_fingerprint=row.definition_fingerprint,
        input_digest=row.input_digest,
        output_digest=row.output_digest,
        created_at=row.created_at,
    )


def _lease(row: repo.LeaseRow) -> LeaseInfo:
    return LeaseInfo(
        id=row.id,
        digest=row.digest,
        holder=row.holder,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )


# -- leases -------------------------------------------------------------------------------


def insert_leases(
    conn: SqlRunner,
    leases: Iterable[tuple[str, str | None]],
    holder: str,
    now: datetime,
    expires: datetime,
) -> None:
    """Insert ``(lease id, digest)`` leases; the digest may be unknown yet (None)."""
    repo.insert_leases(conn, leases, holder, now, expires)


def lease_row(conn: SqlRunner, lease_id: str) -> LeaseInfo | None:
    row = repo.lease(conn, lease_id)
    return None if row is None else _lease(row)


def bind_lease(conn: SqlRunner, lease_id: str, digest: str, now: datetime) -> bool:
    """Point a live lease at the digest its bytes turned out to have; False if it lapsed."""
    lease = repo.lease(conn, lease_id)
    if lease is None or lease.expires_at <= now:
        return False
    repo.point_lease(conn, lease_id, digest)
    return True


def release_leases(conn: SqlRunner, lease_ids: Iterable[str]) -> None:
    repo.delete_leases(conn, lease_ids)


def live_leases(conn: SqlRunner, now: datetime) -> list[LeaseInfo]:
    return [_lease(row) for row in repo.live_leases(conn, now)]


def leases_for(conn: SqlRunner, digest: str) -> list[LeaseInfo]:
    return [_lease(row) for row in repo.leases_for_blob(conn, digest)]


# -- blobs and refs -----------------------------------------------------------------------


def blob_row(conn: SqlRunner, digest: str) -> tuple[int, str | None, datetime, datetime | None]:
    """``(size, media type, created at, verified at)``; raises ``LookupError`` if absent."""
    row = repo.blob(conn, digest)
    if row is None:
        raise LookupError(digest)
    return row.size, row.media_type, row.created_at, row.verified_at


def insert_blob(
    conn: SqlRunner, digest: str, size: int, media_type: str | None, now: datetime
) -> None:
    repo.insert_blob(conn, digest, size, media_type, now)


def insert_ref(
    conn: SqlRunner,
    *,
    digest: str,
    run_id: str,
    task_id: str,
    name: str,
    path: str | None,
    definition_fingerprint: str | None,
    input_digest: str | None,
    output_digest: str | None,
    now: datetime,
) -> ArtifactRef:
    """Add the next version of ``name`` inside the caller's write transaction."""
    return _ref(
        repo.insert_ref(
            conn,
            digest=digest,
            run_id=run_id,
            task_id=task_id,
            name=name,
            path=path,
            definition_fingerprint=definition_fingerprint,
            input_digest=input_digest,
            output_digest=output_digest,
            now=now,
        )
    )


def list_refs(
    conn: SqlRunner,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    name: str | None = None,
    digest: str | None = None,
) -> list[ArtifactRef]:
    """Refs matching every filter given, by name then version."""
    rows = repo.refs(conn, run_id=run_id, task_id=task_id, name=name, digest=digest)
    return [_ref(row) for row in rows]


def latest(conn: SqlRunner, name: str) -> ArtifactRef | None:
    """The newest version of the artifact ``name``, or None if it was never written."""
    row = repo.latest_ref(conn, name)
    return None if row is None else _ref(row)


def resolve_digest(conn: SqlRunner, text: str) -> str | None:
    """The full digest a user means by ``sha256:<hex>``, bare hex or a unique prefix of at
    least 8 hex digits among known blobs; None when nothing matches; exit 2 if ambiguous."""
    prefix = hex_prefix(text)
    if prefix is None:
        raise UsageError(
            f"{text!r} is not an artifact digest",
            code="artifact.bad_digest",
            hint="pass sha256:<hex> (or at least 8 of its hex digits)",
        )
    if len(prefix) == 64:
        return DIGEST_PREFIX + prefix
    found = repo.digests_with_prefix(conn, DIGEST_PREFIX + prefix, limit=2)
    if len(found) > 1:
        raise UsageError(
            f"digest prefix {text!r} matches more than one artifact",
            code="artifact.ambiguous_digest",
            hint="give more hex digits",
        )
    return found[0] if found else None
