"""The artifact rows: blobs, named versioned refs and ingestion leases.

Everything here is driver-level SQL over a :class:`~agentctl.store.engine.SqlRunner`, so it
runs inside whichever transaction the caller holds: a SQLAlchemy ``Connection`` from
``Store.write()`` / ``Store.read()`` or the executor's ``DriverSession``. That is what lets
artifact refs commit in the same transaction as the task completion that produced them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.artifacts.layout import DIGEST_PREFIX, hex_prefix, parse_timestamp, sqlite_timestamp
from agentctl.artifacts.models import ArtifactRef, LeaseInfo
from agentctl.errors import NewerFormatError, UsageError
from agentctl.store.tables import FORMAT_VERSION

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

_REF_COLUMNS = (
    "r.id, r.blob_digest, r.run_id, r.task_id, r.name, r.version, r.path, b.size_bytes, "
    "r.definition_fingerprint, r.input_digest, r.output_digest, r.created_at, r.format_version"
)
_REF_FROM = "FROM artifact_refs r JOIN artifact_blobs b ON b.digest = r.blob_digest"


def _ref(row: Sequence[Any]) -> ArtifactRef:
    if int(row[12]) > FORMAT_VERSION:
        raise NewerFormatError(
            f"artifact ref {row[0]} has record format version {row[12]}; this agentctl reads "
            f"versions up to {FORMAT_VERSION}",
            hint="it was written by a newer agentctl: upgrade agentctl to read it",
        )
    return ArtifactRef(
        id=int(row[0]),
        digest=str(row[1]),
        run_id=str(row[2]),
        task_id=str(row[3]),
        name=str(row[4]),
        version=int(row[5]),
        path=row[6],
        size=int(row[7]),
        definition_fingerprint=row[8],
        input_digest=row[9],
        output_digest=row[10],
        created_at=parse_timestamp(row[11]),
    )


def _lease(row: Sequence[Any]) -> LeaseInfo:
    return LeaseInfo(
        id=str(row[0]),
        digest=row[1],
        holder=str(row[2]),
        created_at=parse_timestamp(row[3]),
        expires_at=parse_timestamp(row[4]),
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
    created, until = sqlite_timestamp(now), sqlite_timestamp(expires)
    for lease_id, digest in leases:
        conn.exec_driver_sql(
            "INSERT INTO artifact_leases (id, blob_digest, holder, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (lease_id, digest, holder, created, until),
        )


def lease_row(conn: SqlRunner, lease_id: str) -> LeaseInfo | None:
    row = conn.exec_driver_sql(
        "SELECT id, blob_digest, holder, created_at, expires_at FROM artifact_leases WHERE id = ?",
        (lease_id,),
    ).first()
    return None if row is None else _lease(row)


def bind_lease(conn: SqlRunner, lease_id: str, digest: str, now: datetime) -> bool:
    """Point a live lease at the digest its bytes turned out to have; False if it lapsed."""
    lease = lease_row(conn, lease_id)
    if lease is None or lease.expires_at <= now:
        return False
    conn.exec_driver_sql(
        "UPDATE artifact_leases SET blob_digest = ? WHERE id = ?", (digest, lease_id)
    )
    return True


def release_leases(conn: SqlRunner, lease_ids: Iterable[str]) -> None:
    for lease_id in lease_ids:
        conn.exec_driver_sql("DELETE FROM artifact_leases WHERE id = ?", (lease_id,))


def live_leases(conn: SqlRunner, now: datetime) -> list[LeaseInfo]:
    rows = conn.exec_driver_sql(
        "SELECT id, blob_digest, holder, created_at, expires_at FROM artifact_leases "
        "WHERE expires_at > ?",
        (sqlite_timestamp(now),),
    )
    return [_lease(row) for row in rows]


def leases_for(conn: SqlRunner, digest: str) -> list[LeaseInfo]:
    rows = conn.exec_driver_sql(
        "SELECT id, blob_digest, holder, created_at, expires_at FROM artifact_leases "
        "WHERE blob_digest = ? ORDER BY created_at",
        (digest,),
    )
    return [_lease(row) for row in rows]


# -- blobs and refs -----------------------------------------------------------------------


def blob_row(conn: SqlRunner, digest: str) -> tuple[int, str | None, datetime, datetime | None]:
    """``(size, media type, created at, verified at)``; raises ``LookupError`` if absent."""
    row = conn.exec_driver_sql(
        "SELECT size_bytes, media_type, created_at, verified_at FROM artifact_blobs "
        "WHERE digest = ?",
        (digest,),
    ).first()
    if row is None:
        raise LookupError(digest)
    verified = parse_timestamp(row[3]) if row[3] is not None else None
    return int(row[0]), row[1], parse_timestamp(row[2]), verified


def insert_blob(
    conn: SqlRunner, digest: str, size: int, media_type: str | None, now: datetime
) -> None:
    conn.exec_driver_sql(
        "INSERT OR IGNORE INTO artifact_blobs (digest, size_bytes, media_type, created_at) "
        "VALUES (?, ?, ?, ?)",
        (digest, size, media_type, sqlite_timestamp(now)),
    )


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
    """Add the next version of ``name``. The caller's write transaction is IMMEDIATE, so
    reading the current maximum and inserting the next one cannot interleave with another
    writer; the unique (name, version) constraint backs that up."""
    row = conn.exec_driver_sql(
        "SELECT COALESCE(MAX(version), 0) FROM artifact_refs WHERE name = ?", (name,)
    ).first()
    version = int(row[0]) + 1 if row is not None else 1
    conn.exec_driver_sql(
        "INSERT INTO artifact_refs (format_version, blob_digest, run_id, task_id, name, "
        "version, path, definition_fingerprint, input_digest, output_digest, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            FORMAT_VERSION,
            digest,
            run_id,
            task_id,
            name,
            version,
            path,
            definition_fingerprint,
            input_digest,
            output_digest,
            sqlite_timestamp(now),
        ),
    )
    found = conn.exec_driver_sql(
        f"SELECT {_REF_COLUMNS} {_REF_FROM} WHERE r.name = ? AND r.version = ?",  # noqa: S608
        (name, version),
    ).first()
    return _ref(found)


def list_refs(
    conn: SqlRunner,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    name: str | None = None,
    digest: str | None = None,
) -> list[ArtifactRef]:
    """Refs matching every filter given, by name then version (each filter is indexed:
    (run_id, task_id), (name, version) and blob_digest)."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("r.run_id", run_id),
        ("r.task_id", task_id),
        ("r.name", name),
        ("r.blob_digest", digest),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.exec_driver_sql(
        f"SELECT {_REF_COLUMNS} {_REF_FROM} {clause} "  # noqa: S608 - fixed identifiers
        "ORDER BY r.name, r.version",
        tuple(params),
    )
    return [_ref(row) for row in rows]


def latest(conn: SqlRunner, name: str) -> ArtifactRef | None:
    """The newest version of the artifact ``name``, or None if it was never written."""
    row = conn.exec_driver_sql(
        f"SELECT {_REF_COLUMNS} {_REF_FROM} WHERE r.name = ? "  # noqa: S608
        "ORDER BY r.version DESC LIMIT 1",
        (name,),
    ).first()
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
    rows = list(
        conn.exec_driver_sql(
            "SELECT digest FROM artifact_blobs WHERE digest >= ? AND digest < ? LIMIT 2",
            (DIGEST_PREFIX + prefix, DIGEST_PREFIX + prefix + "g"),
        )
    )
    if len(rows) > 1:
        raise UsageError(
            f"digest prefix {text!r} matches more than one artifact",
            code="artifact.ambiguous_digest",
            hint="give more hex digits",
        )
    return str(rows[0][0]) if rows else None
