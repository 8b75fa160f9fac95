"""The artifact catalog's rows: blobs, named versioned refs and ingestion leases.

Every function runs inside the transaction its caller holds, on a
:class:`~agentctl.store.engine.SqlRunner`: a SQLAlchemy ``Connection`` from
``Store.write()`` / ``Store.read()`` or the executor's ``DriverSession``. That is what lets
artifact refs commit in the same transaction as the task completion that produced them.
Times are stored with :mod:`agentctl.store.timestamps`.

The rows come back as the small typed records below; ``agentctl.artifacts`` turns them
into the values it hands out. Decisions (is a lease still live enough to bind, which
blob is unreachable) stay there; this module only reads and writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.timestamps import from_db, to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "BlobRow",
    "LeaseRow",
    "RefRow",
    "all_blobs",
    "blob",
    "count_expired_leases",
    "delete_expired_leases",
    "delete_leases",
    "delete_unreferenced_blob",
    "digests_with_prefix",
    "insert_blob",
    "insert_leases",
    "insert_ref",
    "latest_ref",
    "lease",
    "leases_for_blob",
    "live_leases",
    "mark_verified",
    "point_lease",
    "referenced_digests",
    "refs",
    "run_refs",
]


@dataclass(frozen=True, slots=True)
class RefRow:
    id: int
    digest: str
    run_id: str
    task_id: str
    name: str
    version: int
    path: str | None
    size: int
    definition_fingerprint: str | None
    input_digest: str | None
    output_digest: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class LeaseRow:
    id: str
    digest: str | None
    holder: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class BlobRow:
    digest: str
    size: int
    media_type: str | None
    created_at: datetime
    verified_at: datetime | None


_REF_COLUMNS = (
    "r.id, r.blob_digest, r.run_id, r.task_id, r.name, r.version, r.path, b.size_bytes, "
    "r.definition_fingerprint, r.input_digest, r.output_digest, r.created_at, r.format_version"
)
_REF_FROM = "FROM artifact_refs r JOIN artifact_blobs b ON b.digest = r.blob_digest"
_LEASE_COLUMNS = "id, blob_digest, holder, created_at, expires_at"
_BLOB_COLUMNS = "digest, size_bytes, media_type, created_at, verified_at"


def _ref(row: Sequence[Any]) -> RefRow:
    check_format_version("artifact ref", row[0], int(row[12]))
    return RefRow(
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
        created_at=from_db(row[11]),
    )


def _lease(row: Sequence[Any]) -> LeaseRow:
    return LeaseRow(
        id=str(row[0]),
        digest=row[1],
        holder=str(row[2]),
        created_at=from_db(row[3]),
        expires_at=from_db(row[4]),
    )


def _blob(row: Sequence[Any]) -> BlobRow:
    return BlobRow(
        digest=str(row[0]),
        size=int(row[1]),
        media_type=row[2],
        created_at=from_db(row[3]),
        verified_at=from_db(row[4]),
    )


# -- leases -------------------------------------------------------------------------------


def insert_leases(
    conn: SqlRunner,
    leases: Iterable[tuple[str, str | None]],
    holder: str,
    created_at: datetime,
    expires_at: datetime,
) -> None:
    """Insert ``(lease id, digest)`` leases; the digest may be unknown yet (None)."""
    created, until = to_db(created_at), to_db(expires_at)
    for lease_id, digest in leases:
        conn.exec_driver_sql(
            "INSERT INTO artifact_leases (id, blob_digest, holder, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (lease_id, digest, holder, created, until),
        )


def lease(conn: SqlRunner, lease_id: str) -> LeaseRow | None:
    row = conn.exec_driver_sql(
        f"SELECT {_LEASE_COLUMNS} FROM artifact_leases WHERE id = ?",  # noqa: S608
        (lease_id,),
    ).first()
    return None if row is None else _lease(row)


def point_lease(conn: SqlRunner, lease_id: str, digest: str) -> None:
    conn.exec_driver_sql(
        "UPDATE artifact_leases SET blob_digest = ? WHERE id = ?", (digest, lease_id)
    )


def delete_leases(conn: SqlRunner, lease_ids: Iterable[str]) -> None:
    for lease_id in lease_ids:
        conn.exec_driver_sql("DELETE FROM artifact_leases WHERE id = ?", (lease_id,))


def live_leases(conn: SqlRunner, now: datetime) -> list[LeaseRow]:
    rows = conn.exec_driver_sql(
        f"SELECT {_LEASE_COLUMNS} FROM artifact_leases WHERE expires_at > ?",  # noqa: S608
        (to_db(now),),
    )
    return [_lease(row) for row in rows]


def leases_for_blob(conn: SqlRunner, digest: str) -> list[LeaseRow]:
    rows = conn.exec_driver_sql(
        f"SELECT {_LEASE_COLUMNS} FROM artifact_leases "  # noqa: S608
        "WHERE blob_digest = ? ORDER BY created_at",
        (digest,),
    )
    return [_lease(row) for row in rows]


def count_expired_leases(conn: SqlRunner, now: datetime) -> int:
    row = conn.exec_driver_sql(
        "SELECT COUNT(*) FROM artifact_leases WHERE expires_at <= ?", (to_db(now),)
    ).first()
    return int(row[0]) if row is not None else 0


def delete_expired_leases(conn: SqlRunner, now: datetime) -> None:
    conn.exec_driver_sql("DELETE FROM artifact_leases WHERE expires_at <= ?", (to_db(now),))


# -- blobs --------------------------------------------------------------------------------


def blob(conn: SqlRunner, digest: str) -> BlobRow | None:
    row = conn.exec_driver_sql(
        f"SELECT {_BLOB_COLUMNS} FROM artifact_blobs WHERE digest = ?",  # noqa: S608
        (digest,),
    ).first()
    return None if row is None else _blob(row)


def all_blobs(conn: SqlRunner) -> list[BlobRow]:
    rows = conn.exec_driver_sql(f"SELECT {_BLOB_COLUMNS} FROM artifact_blobs")  # noqa: S608
    return [_blob(row) for row in rows]


def insert_blob(
    conn: SqlRunner, digest: str, size: int, media_type: str | None, now: datetime
) -> None:
    """Record a blob unless it is already recorded (its first row wins)."""
    conn.exec_driver_sql(
        "INSERT OR IGNORE INTO artifact_blobs (digest, size_bytes, media_type, created_at) "
        "VALUES (?, ?, ?, ?)",
        (digest, size, media_type, to_db(now)),
    )


def mark_verified(conn: SqlRunner, digests: Iterable[str], now: datetime) -> None:
    stamp = to_db(now)
    for digest in digests:
        conn.exec_driver_sql(
            "UPDATE artifact_blobs SET verified_at = ? WHERE digest = ?", (stamp, digest)
        )


def delete_unreferenced_blob(conn: SqlRunner, digest: str) -> None:
    """Delete the blob row unless a ref points at it (the check and the delete are one
    statement, so a ref committed meanwhile always wins)."""
    conn.exec_driver_sql(
        "DELETE FROM artifact_blobs WHERE digest = ? AND NOT EXISTS "
        "(SELECT 1 FROM artifact_refs WHERE blob_digest = ?)",
        (digest, digest),
    )


def digests_with_prefix(conn: SqlRunner, start: str, limit: int) -> list[str]:
    """Up to ``limit`` recorded digests that start with ``start`` (a lowercase hex digest
    or its prefix: ``g`` sorts after every hex digit)."""
    rows = conn.exec_driver_sql(
        "SELECT digest FROM artifact_blobs WHERE digest >= ? AND digest < ? LIMIT ?",
        (start, start + "g", limit),
    )
    return [str(row[0]) for row in rows]


# -- refs ---------------------------------------------------------------------------------


def referenced_digests(conn: SqlRunner) -> set[str]:
    return {str(row[0]) for row in conn.exec_driver_sql("SELECT blob_digest FROM artifact_refs")}


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
) -> RefRow:
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
            to_db(now),
        ),
    )
    found = conn.exec_driver_sql(
        f"SELECT {_REF_COLUMNS} {_REF_FROM} WHERE r.name = ? AND r.version = ?",  # noqa: S608
        (name, version),
    ).first()
    return _ref(found)


def refs(
    conn: SqlRunner,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    name: str | None = None,
    digest: str | None = None,
) -> list[RefRow]:
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


def run_refs(conn: SqlRunner, run_id: str) -> list[RefRow]:
    """A run's refs in the order they were recorded (``inspect`` lists them so)."""
    rows = conn.exec_driver_sql(
        f"SELECT {_REF_COLUMNS} {_REF_FROM} WHERE r.run_id = ? ORDER BY r.id",  # noqa: S608
        (run_id,),
    )
    return [_ref(row) for row in rows]


def latest_ref(conn: SqlRunner, name: str) -> RefRow | None:
    """The newest version of the artifact ``name``, or None if it was never written."""
    row = conn.exec_driver_sql(
        f"SELECT {_REF_COLUMNS} {_REF_FROM} WHERE r.name = ? "  # noqa: S608
        "ORDER BY r.version DESC LIMIT 1",
        (name,),
    ).first()
    return None if row is None else _ref(row)
