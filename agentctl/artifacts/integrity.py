"""Checking that stored bytes still hash to their names.

A blob is *missing* when its file is gone and *corrupt* when its bytes no longer hash to
its digest (or its size differs from the recorded one). Both block reuse: retry and repair
call :func:`check_refs` before creating a run, so a reused task never points at bytes that
are not there.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentctl.artifacts.ingest import hash_file
from agentctl.artifacts.layout import Layout
from agentctl.artifacts.models import ArtifactProblem, ArtifactRef, ProblemKind

__all__ = ["blob_problem", "check_refs"]


def blob_problem(
    layout: Layout, digest: str, expected_size: int | None
) -> tuple[ProblemKind, str] | None:
    """None when the blob is intact, else its problem kind and a message naming it."""
    path = layout.blob_path(digest)
    try:
        actual, size = hash_file(path, layout.sealer)
    except FileNotFoundError:
        return "missing", f"artifact {digest} is missing from the store ({path})"
    except OSError as exc:
        return "corrupt", f"artifact {digest} cannot be read ({path}): {exc.strerror}"
    if actual != digest:
        return "corrupt", f"artifact {digest} is corrupt: its bytes now hash to {actual}"
    if expected_size is not None and size != expected_size:
        return "corrupt", f"artifact {digest} is {size} bytes, recorded as {expected_size}"
    return None


def check_refs(layout: Layout, refs: Iterable[ArtifactRef]) -> list[ArtifactProblem]:
    """One problem per ref whose bytes are missing or corrupt; each blob is hashed once."""
    seen: dict[str, tuple[ProblemKind, str] | None] = {}
    problems: list[ArtifactProblem] = []
    for ref in refs:
        if ref.digest not in seen:
            seen[ref.digest] = blob_problem(layout, ref.digest, ref.size)
        found = seen[ref.digest]
        if found is None:
            continue
        kind, message = found
        problems.append(
            ArtifactProblem(
                digest=ref.digest,
                kind=kind,
                message=f"{message}; it is version {ref.version} of {ref.name!r} written by "
                f"task {ref.task_id} of run {ref.run_id}",
                path=str(layout.blob_path(ref.digest)),
                run_id=ref.run_id,
                task_id=ref.task_id,
                name=ref.name,
                version=ref.version,
            )
        )
    return problems
