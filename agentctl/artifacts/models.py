"""The values the artifact store hands out: ingested blobs, refs, reports.

Each has ``to_json`` with the CLI's camelCase keys, so the CLI and ``inspect`` render the
same shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "ArtifactProblem",
    "ArtifactRef",
    "BlobInfo",
    "ExportResult",
    "GcReport",
    "IngestedBlob",
    "LeaseInfo",
    "ProblemKind",
    "VerifyReport",
]

ProblemKind = Literal["missing", "corrupt"]


@dataclass(frozen=True, slots=True)
class IngestedBlob:
    """Bytes published in the store and still protected by the lease ``lease_id``.

    Hand it to :meth:`ArtifactStore.record_ref` in the task's completion transaction; the
    lease keeps gc away until then (one hour).
    """

    digest: str
    size: int
    lease_id: str

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "size": self.size, "leaseId": self.lease_id}


@dataclass(frozen=True, slots=True)
class ArtifactRef:
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
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "digest": self.digest,
            "runId": self.run_id,
            "taskId": self.task_id,
            "name": self.name,
            "version": self.version,
            "path": self.path,
            "size": self.size,
            "definitionFingerprint": self.definition_fingerprint,
            "inputDigest": self.input_digest,
            "outputDigest": self.output_digest,
            "createdAt": self.created_at.isoformat(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ArtifactRef:
        """Read back :meth:`to_json` (a task's artifact manifest holds these)."""
        return cls(
            id=int(data["id"]),
            digest=str(data["digest"]),
            run_id=str(data["runId"]),
            task_id=str(data["taskId"]),
            name=str(data["name"]),
            version=int(data["version"]),
            path=data.get("path"),
            size=int(data["size"]),
            definition_fingerprint=data.get("definitionFingerprint"),
            input_digest=data.get("inputDigest"),
            output_digest=data.get("outputDigest"),
            created_at=datetime.fromisoformat(str(data["createdAt"])),
        )


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    id: str
    digest: str | None
    holder: str
    created_at: datetime
    expires_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "leaseId": self.id,
            "digest": self.digest,
            "holder": self.holder,
            "createdAt": self.created_at.isoformat(),
            "expiresAt": self.expires_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What ``artifacts inspect`` shows: the blob row, its file and who points at it."""

    digest: str
    size: int | None
    media_type: str | None
    created_at: datetime | None
    verified_at: datetime | None
    tracked: bool
    present: bool
    path: str
    refs: list[ArtifactRef] = field(default_factory=list)
    leases: list[LeaseInfo] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "size": self.size,
            "mediaType": self.media_type,
            "createdAt": self.created_at.isoformat() if self.created_at else None,
            "verifiedAt": self.verified_at.isoformat() if self.verified_at else None,
            "tracked": self.tracked,
            "present": self.present,
            "path": self.path,
            "refs": [ref.to_json() for ref in self.refs],
            "leases": [lease.to_json() for lease in self.leases],
        }


@dataclass(frozen=True, slots=True)
class ArtifactProblem:
    """Bytes that are gone or no longer hash to their name; names the ref when known."""

    digest: str
    kind: ProblemKind
    message: str
    path: str
    run_id: str | None = None
    task_id: str | None = None
    name: str | None = None
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "kind": self.kind,
            "message": self.message,
            "path": self.path,
            "runId": self.run_id,
            "taskId": self.task_id,
            "name": self.name,
            "version": self.version,
        }


@dataclass(frozen=True, slots=True)
class VerifyReport:
    checked: int
    ok: int
    problems: list[ArtifactProblem]

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "problems": [problem.to_json() for problem in self.problems],
        }


@dataclass(frozen=True, slots=True)
class ExportResult:
    digest: str
    path: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "path": self.path, "size": self.size}


@dataclass(slots=True)
class GcReport:
    """What gc removed (or, with ``dry_run``, would remove) and why the rest stayed."""

    dry_run: bool
    older_than_days: float
    removed_blobs: list[str] = field(default_factory=list)
    removed_bytes: int = 0
    removed_temp_files: list[str] = field(default_factory=list)
    expired_leases: int = 0
    kept_referenced: int = 0
    kept_leased: int = 0
    kept_recent: int = 0
    restored_from_quarantine: list[str] = field(default_factory=list)
    purged_from_quarantine: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "olderThanDays": self.older_than_days,
            "removedBlobs": self.removed_blobs,
            "removedBytes": self.removed_bytes,
            "removedTempFiles": self.removed_temp_files,
            "expiredLeases": self.expired_leases,
            "keptReferenced": self.kept_referenced,
            "keptLeased": self.kept_leased,
            "keptRecent": self.kept_recent,
            "restoredFromQuarantine": self.restored_from_quarantine,
            "purgedFromQuarantine": self.purged_from_quarantine,
        }
