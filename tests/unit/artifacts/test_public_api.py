"""The package's curated surface: what the executor and the CLI may import."""

from __future__ import annotations

import agentctl.artifacts as artifacts


def test_public_names_are_pinned() -> None:
    assert sorted(artifacts.__all__) == [
        "ArtifactProblem",
        "ArtifactRef",
        "ArtifactStore",
        "BlobInfo",
        "DEFAULT_GC_DAYS",
        "ExportResult",
        "GcReport",
        "IngestedBlob",
        "LEASE_SECONDS",
        "LeaseInfo",
        "MAX_FILE_BYTES",
        "VerifyReport",
        "find_version",
        "list_blobs",
    ]
    assert artifacts.MAX_FILE_BYTES == 16 * 1024 * 1024  # docs/workflow-language.md
    assert artifacts.LEASE_SECONDS == 3600.0
    assert artifacts.DEFAULT_GC_DAYS == 30.0
