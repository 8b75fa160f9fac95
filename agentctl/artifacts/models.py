"""The values the artifact store hands out: ingested blobs, refs, reports.

Each is a typed record (:mod:`agentctl.typed_records`): ``to_json`` gives the CLI's
camelCase keys, so the CLI and ``inspect`` render the same shapes, and an ``ArtifactRef``
reads back from a task's stored artifact manifest with ``from_json``. A ref and a lease are
declared with the catalog's rows (:mod:`agentctl.store.artifacts_repo`), which reads them
straight into these records.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from pydantic.dataclasses import dataclass

from agentctl.store.artifacts_repo import ArtifactRef, LeaseInfo
from agentctl.typed_records import CAMEL, CamelRecord, IsoDateTime

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


@dataclass(frozen=True, slots=True, config=CAMEL)
class IngestedBlob(CamelRecord):
    """Bytes published in the store and still protected by the lease ``lease_id``.

    Hand it to :meth:`ArtifactStore.record_ref` in the task's completion transaction; the
    lease keeps gc away until then (one hour).
    """

    digest: str
    size: int
    lease_id: str


@dataclass(frozen=True, slots=True, config=CAMEL)
class BlobInfo(CamelRecord):
    """What ``artifacts inspect`` shows: the blob row, its file and who points at it."""

    digest: str
    size: int | None
    media_type: str | None
    created_at: IsoDateTime | None
    verified_at: IsoDateTime | None
    tracked: bool
    present: bool
    path: str
    refs: list[ArtifactRef] = field(default_factory=list)
    leases: list[LeaseInfo] = field(default_factory=list)


@dataclass(frozen=True, slots=True, config=CAMEL)
class ArtifactProblem(CamelRecord):
    """Bytes that are gone or no longer hash to their name; names the ref when known."""

    digest: str
    kind: ProblemKind
    message: str
    path: str
    run_id: str | None = None
    task_id: str | None = None
    name: str | None = None
    version: int | None = None


@dataclass(frozen=True, slots=True, config=CAMEL)
class VerifyReport(CamelRecord):
    checked: int
    ok: int
    problems: list[ArtifactProblem]


@dataclass(frozen=True, slots=True, config=CAMEL)
class ExportResult(CamelRecord):
    digest: str
    path: str
    size: int


@dataclass(slots=True, config=CAMEL)
class GcReport(CamelRecord):
    """What gc removed (or, with ``dry_run``, would remove) and why the rest stayed."""

    dry_run: bool
    older_than_days: int | float
    removed_blobs: list[str] = field(default_factory=list)
    removed_bytes: int = 0
    removed_temp_files: list[str] = field(default_factory=list)
    expired_leases: int = 0
    kept_referenced: int = 0
    kept_leased: int = 0
    kept_recent: int = 0
    restored_from_quarantine: list[str] = field(default_factory=list)
    purged_from_quarantine: list[str] = field(default_factory=list)
