"""The artifact catalog: blobs, named versioned refs and ingestion leases.

Every function runs inside the transaction its caller holds, on a
:class:`~agentctl.store.engine.SqlRunner`: a SQLAlchemy ``Connection`` from
``Store.write()`` / ``Store.read()`` or the executor's ``DriverSession``. That is what lets
artifact refs commit in the same transaction as the task completion that produced them.
Times are stored with :mod:`agentctl.store.timestamps`.

A ref and a lease come back as the records the artifact store hands out
(:class:`ArtifactRef`, :class:`LeaseInfo`, published by :mod:`agentctl.artifacts`); they
are declared here, where their rows are read, so there is one record per family and no
copying between twins. Decisions (is a lease still live enough to bind, which blob is
unreachable) stay in :mod:`agentctl.artifacts`; this module only reads and writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass as plain_dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field
from pydantic.dataclasses import dataclass

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.statements import Statement, statement
from agentctl.store.timestamps import from_db, to_db
from agentctl.typed_records import CAMEL, CamelRecord, IsoDateTime

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "ArtifactRef",
    "BlobRow",
    "LeaseInfo",
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
]


@dataclass(frozen=True, slots=True, config=CAMEL)
class ArtifactRef(CamelRecord):
    """One version of a named artifact: which run and task wrote which blob."""

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
    created_at: IsoDateTime


@dataclass(frozen=True, slots=True, config=CAMEL)
class LeaseInfo(CamelRecord):
    """An ingestion lease: it keeps gc away from ``digest`` (unknown until the bytes are
    hashed) until it expires or is released."""

    id: Annotated[str, Field(alias="leaseId")]
    digest: str | None
    holder: str
    created_at: IsoDateTime
    expires_at: IsoDateTime


@plain_dataclass(frozen=True, slots=True)
class BlobRow:
    """A blob's row (what ``artifacts inspect`` and ``verify`` read of it)."""

    digest: str
    size: int
    media_type: str | None
    created_at: datetime
    verified_at: datetime | None


def _ref(row: Sequence[Any]) -> ArtifactRef:
    # The columns of _ref_query, in ArtifactRef's order, then format_version.
    check_format_version("artifact ref", row[0], int(row[12]))
    id_, digest, run_id, task_id, name, version, path, size, fingerprint, input_, output = row[:11]
    return ArtifactRef(
        id_, digest, run_id, task_id, name, version, path, size, fingerprint, input_, output,
        from_db(row[11]),
    )  # fmt: skip


def _lease(row: Sequence[Any]) -> LeaseInfo:
    return LeaseInfo(row[0], row[1], row[2], from_db(row[3]), from_db(row[4]))


def _blob(row: Sequence[Any]) -> BlobRow:
    return BlobRow(row[0], int(row[1]), row[2], from_db(row[3]), from_db(row[4]))


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
    _insert_lease.run_many(
        conn,
        (
            {"id": lease_id, "digest": digest, "holder": holder, "created": created, "until": until}
            for lease_id, digest in leases
        ),
    )


@statement
def _insert_lease(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.artifact_tables import artifact_leases

    return insert(artifact_leases).values(
        id=bindparam("id"),
        blob_digest=bindparam("digest"),
        holder=bindparam("holder"),
        created_at=bindparam("created"),
        expires_at=bindparam("until"),
    )


def _lease_query() -> Select[Any]:
    from sqlalchemy import select

    from agentctl.store.artifact_tables import artifact_leases

    c = artifact_leases.c
    return select(c.id, c.blob_digest, c.holder, c.created_at, c.expires_at)


def lease(conn: SqlRunner, lease_id: str) -> LeaseInfo | None:
    row = _lease_by_id.run(conn, lease_id=lease_id).first()
    return None if row is None else _lease(row)


@statement
def _lease_by_id(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.artifact_tables import artifact_leases

    return _lease_query().where(artifact_leases.c.id == bindparam("lease_id"))


def point_lease(conn: SqlRunner, lease_id: str, digest: str) -> None:
    _point_lease.run(conn, digest=digest, lease_id=lease_id)


@statement
def _point_lease(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.artifact_tables import artifact_leases

    return (
        update(artifact_leases)
        .where(artifact_leases.c.id == bindparam("lease_id"))
        .values(blob_digest=bindparam("digest"))
    )


def delete_leases(conn: SqlRunner, lease_ids: Iterable[str]) -> None:
    _delete_lease.run_many(conn, ({"lease_id": lease_id} for lease_id in lease_ids))


@statement
def _delete_lease(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.artifact_tables import artifact_leases

    return delete(artifact_leases).where(artifact_leases.c.id == bindparam("lease_id"))


def live_leases(conn: SqlRunner, now: datetime) -> list[LeaseInfo]:
    return [_lease(row) for row in _live_leases.run(conn, now=to_db(now))]


@statement
def _live_leases(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.artifact_tables import artifact_leases

    return _lease_query().where(artifact_leases.c.expires_at > bindparam("now"))


def leases_for_blob(conn: SqlRunner, digest: str) -> list[LeaseInfo]:
    return [_lease(row) for row in _leases_for_blob.run(conn, digest=digest)]


@statement
def _leases_for_blob(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.artifact_tables import artifact_leases

    c = artifact_leases.c
    return _lease_query().where(c.blob_digest == bindparam("digest")).order_by(c.created_at)


def count_expired_leases(conn: SqlRunner, now: datetime) -> int:
    row = _count_expired_leases.run(conn, now=to_db(now)).first()
    return int(row[0]) if row is not None else 0


@statement
def _count_expired_leases(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.artifact_tables import artifact_leases

    return (
        select(func.count())
        .select_from(artifact_leases)
        .where(artifact_leases.c.expires_at <= bindparam("now"))
    )


def delete_expired_leases(conn: SqlRunner, now: datetime) -> None:
    _delete_expired_leases.run(conn, now=to_db(now))


@statement
def _delete_expired_leases(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.artifact_tables import artifact_leases

    return delete(artifact_leases).where(artifact_leases.c.expires_at <= bindparam("now"))


# -- blobs --------------------------------------------------------------------------------


def _blob_query() -> Select[Any]:
    from sqlalchemy import select

    from agentctl.store.artifact_tables import artifact_blobs

    c = artifact_blobs.c
    return select(c.digest, c.size_bytes, c.media_type, c.created_at, c.verified_at)


def blob(conn: SqlRunner, digest: str) -> BlobRow | None:
    row = _blob_by_digest.run(conn, digest=digest).first()
    return None if row is None else _blob(row)


@statement
def _blob_by_digest(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.artifact_tables import artifact_blobs

    return _blob_query().where(artifact_blobs.c.digest == bindparam("digest"))


def all_blobs(conn: SqlRunner) -> list[BlobRow]:
    return [_blob(row) for row in _all_blobs.run(conn)]


@statement
def _all_blobs(_: SqlDialect) -> Executable:
    return _blob_query()


def insert_blob(
    conn: SqlRunner, digest: str, size: int, media_type: str | None, now: datetime
) -> None:
    """Record a blob unless it is already recorded (its first row wins)."""
    _insert_blob.run(conn, digest=digest, size=size, media_type=media_type, now=to_db(now))


@statement
def _insert_blob(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.artifact_tables import artifact_blobs

    return sql.insert_ignoring(artifact_blobs).values(
        digest=bindparam("digest"),
        size_bytes=bindparam("size"),
        media_type=bindparam("media_type"),
        created_at=bindparam("now"),
    )


def mark_verified(conn: SqlRunner, digests: Iterable[str], now: datetime) -> None:
    stamp = to_db(now)
    _mark_verified.run_many(conn, ({"now": stamp, "digest": digest} for digest in digests))


@statement
def _mark_verified(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.artifact_tables import artifact_blobs

    return (
        update(artifact_blobs)
        .where(artifact_blobs.c.digest == bindparam("digest"))
        .values(verified_at=bindparam("now"))
    )


def delete_unreferenced_blob(conn: SqlRunner, digest: str) -> None:
    """Delete the blob row unless a ref points at it (the check and the delete are one
    statement, so a ref committed meanwhile always wins)."""
    _delete_unreferenced_blob.run(conn, digest=digest)


@statement
def _delete_unreferenced_blob(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete, exists, select

    from agentctl.store.artifact_tables import artifact_blobs, artifact_refs

    digest: Any = bindparam("digest")
    referenced = exists(select(1).where(artifact_refs.c.blob_digest == digest))
    return delete(artifact_blobs).where(artifact_blobs.c.digest == digest, ~referenced)


def digests_with_prefix(conn: SqlRunner, start: str, limit: int) -> list[str]:
    """Up to ``limit`` recorded digests that start with ``start`` (a lowercase hex digest
    or its prefix: ``g`` sorts after every hex digit)."""
    rows = _digests_between.run(conn, start=start, end=start + "g", limit=limit)
    return [str(row[0]) for row in rows]


@statement
def _digests_between(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.artifact_tables import artifact_blobs

    c = artifact_blobs.c
    return (
        select(c.digest)
        .where(c.digest >= bindparam("start"), c.digest < bindparam("end"))
        .limit(bindparam("limit"))
    )


# -- refs ---------------------------------------------------------------------------------


def referenced_digests(conn: SqlRunner) -> set[str]:
    return {str(row[0]) for row in _referenced_digests.run(conn)}


@statement
def _referenced_digests(_: SqlDialect) -> Executable:
    from sqlalchemy import select

    from agentctl.store.artifact_tables import artifact_refs

    return select(artifact_refs.c.blob_digest)


def _ref_query() -> Select[Any]:
    """A ref's columns in :class:`ArtifactRef`'s order (the size is its blob's), then
    ``format_version``."""
    from sqlalchemy import select

    from agentctl.store.artifact_tables import artifact_blobs, artifact_refs

    r = artifact_refs.c
    return select(
        r.id,
        r.blob_digest,
        r.run_id,
        r.task_id,
        r.name,
        r.version,
        r.path,
        artifact_blobs.c.size_bytes,
        r.definition_fingerprint,
        r.input_digest,
        r.output_digest,
        r.created_at,
        r.format_version,
    ).select_from(artifact_refs.join(artifact_blobs, artifact_blobs.c.digest == r.blob_digest))


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
    format_version: int = FORMAT_VERSION,
) -> ArtifactRef:
    """Add the next version of ``name``. The caller's write transaction is IMMEDIATE, so
    reading the current maximum and inserting the next one cannot interleave with another
    writer; the unique (name, version) constraint backs that up. ``format_version`` is the
    record format of a ref copied from another run (retry, replay, fork keep it)."""
    row = _latest_version.run(conn, name=name).first()
    version = int(row[0]) + 1 if row is not None else 1
    _insert_ref.run(
        conn,
        format_version=format_version,
        digest=digest,
        run_id=run_id,
        task_id=task_id,
        name=name,
        version=version,
        path=path,
        definition_fingerprint=definition_fingerprint,
        input_digest=input_digest,
        output_digest=output_digest,
        created_at=to_db(now),
    )
    return _ref(_ref_by_version.run(conn, name=name, version=version).first())


@statement
def _latest_version(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.artifact_tables import artifact_refs

    c = artifact_refs.c
    return select(func.coalesce(func.max(c.version), 0)).where(c.name == bindparam("name"))


@statement
def _insert_ref(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.artifact_tables import artifact_refs

    given = (
        "run_id",
        "task_id",
        "name",
        "version",
        "path",
        "definition_fingerprint",
        "input_digest",
        "output_digest",
        "created_at",
    )
    # inline(): no implicit RETURNING of the new id on PostgreSQL (the ref is read back
    # by (name, version) on both dialects).
    return (
        insert(artifact_refs)
        .values(
            format_version=bindparam("format_version"),
            blob_digest=bindparam("digest"),
            **{column: bindparam(column) for column in given},
        )
        .inline()
    )


@statement
def _ref_by_version(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.artifact_tables import artifact_refs

    c = artifact_refs.c
    return _ref_query().where(c.name == bindparam("name"), c.version == bindparam("version"))


_REF_FILTERS = ("run_id", "task_id", "name", "blob_digest")


def refs(
    conn: SqlRunner,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    name: str | None = None,
    digest: str | None = None,
) -> list[ArtifactRef]:
    """Refs matching every filter given, by name then version (each filter is indexed:
    (run_id, task_id), (name, version) and blob_digest)."""
    given = (run_id, task_id, name, digest)
    filters = tuple(value is not None for value in given)
    values = dict(zip(_REF_FILTERS, given, strict=True))
    return [_ref(row) for row in _refs_where(filters).run(conn, **values)]


@lru_cache(maxsize=16)
def _refs_where(filters: tuple[bool, ...]) -> Statement:
    """The statement of :func:`refs` with the filters it was given."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam

        from agentctl.store.artifact_tables import artifact_refs

        c = artifact_refs.c
        query = _ref_query()
        for column, given in zip(_REF_FILTERS, filters, strict=True):
            if given:
                query = query.where(c[column] == bindparam(column))
        return query.order_by(c.name, c.version)

    return Statement(build, f"refs_where{filters}")


def latest_ref(conn: SqlRunner, name: str) -> ArtifactRef | None:
    """The newest version of the artifact ``name``, or None if it was never written."""
    row = _latest_ref.run(conn, name=name).first()
    return None if row is None else _ref(row)


@statement
def _latest_ref(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.artifact_tables import artifact_refs

    c = artifact_refs.c
    return _ref_query().where(c.name == bindparam("name")).order_by(c.version.desc()).limit(1)
