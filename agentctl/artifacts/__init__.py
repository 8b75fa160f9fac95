"""Content-addressed artifact store: leased ingestion, named versions, verify, export, gc.

Files a task writes are copied into ``artifacts/`` beside the database under their SHA-256
(immutable, deduplicated) and recorded as versions of a named artifact in the same
transaction as the task's completion. See :mod:`agentctl.artifacts.store` for the
ingestion protocol and :mod:`agentctl.artifacts.gc` for why collection is safe.
"""

from agentctl.artifacts.listing import list_blobs
from agentctl.artifacts.models import (
    ArtifactProblem,
    ArtifactRef,
    BlobInfo,
    ExportResult,
    GcReport,
    IngestedBlob,
    LeaseInfo,
    VerifyReport,
)
from agentctl.artifacts.named import find_version
from agentctl.artifacts.store import (
    DEFAULT_GC_DAYS,
    LEASE_SECONDS,
    MAX_FILE_BYTES,
    ArtifactStore,
)

__all__ = [
    "DEFAULT_GC_DAYS",
    "LEASE_SECONDS",
    "MAX_FILE_BYTES",
    "ArtifactProblem",
    "ArtifactRef",
    "ArtifactStore",
    "BlobInfo",
    "ExportResult",
    "GcReport",
    "IngestedBlob",
    "LeaseInfo",
    "VerifyReport",
    "find_version",
    "list_blobs",
]
