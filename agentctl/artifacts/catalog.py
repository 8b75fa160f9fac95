"""The artifact store's own decisions over the catalog's rows.

The rows, read and written as the records :mod:`agentctl.artifacts` hands out, live in
:mod:`agentctl.store.artifacts_repo`; the artifact store calls it directly. What is
decided here: a lapsed lease is not re-pointed, and what a digest abbreviation means.
Every function runs inside the caller's transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from agentctl.artifacts.layout import DIGEST_PREFIX, hex_prefix
from agentctl.errors import UsageError
from agentctl.store import artifacts_repo as repo

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["bind_lease", "resolve_digest"]


def bind_lease(conn: SqlRunner, lease_id: str, digest: str, now: datetime) -> bool:
    """Point a live lease at the digest its bytes turned out to have; False if it lapsed."""
    lease = repo.lease(conn, lease_id)
    if lease is None or lease.expires_at <= now:
        return False
    repo.point_lease(conn, lease_id, digest)
    return True


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
