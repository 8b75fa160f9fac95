"""``agentctl pack lock`` and ``pack verify``: pin a workflow's packs, and check the pins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentctl.errors import ValidationError
from agentctl.spec.pack_lock import LOCK_FILE, write_lock
from agentctl.spec.packs import resolve_packs
from agentctl.spec.result import LoadResult

__all__ = ["lock_packs", "verify_packs"]


def _load(workflow: str) -> LoadResult:
    from agentctl.spec.loader import load_workflow_document

    loaded = load_workflow_document(workflow)
    if not loaded.ok or loaded.document is None:
        raise ValidationError(
            f"{workflow} is not a valid workflow",
            code="workflow.invalid",
            diagnostics=loaded.diagnostics,
            hint=f"`agentctl check {workflow}` shows every diagnostic",
        )
    return loaded


def lock_packs(workflow: str) -> dict[str, Any]:
    """Verify every pack (declared integrity, trust) and write ``agentctl.pack.lock``.

    An existing lock is ignored and replaced: locking is how a reviewed change is pinned."""
    loaded = _load(workflow)
    packs, problems = resolve_packs(loaded, use_lock=False)
    if any(p.is_error for p in problems):
        raise ValidationError(
            f"{workflow}: its packs cannot be locked ({sum(p.is_error for p in problems)} "
            "error(s))",
            code="pack.invalid",
            diagnostics=[*loaded.diagnostics, *problems],
            hint="fix the diagnostics above and run `agentctl pack lock` again",
        )
    path = write_lock(Path(workflow).resolve().parent, [p.locked() for p in packs])
    return {
        "lockFile": str(path),
        "packs": [p.to_json() for p in packs],
        "diagnostics": [*loaded.diagnostics, *problems],
    }


def verify_packs(workflow: str) -> dict[str, Any]:
    """Check every pack against ``agentctl.pack.lock``; exit 2 with what differs."""
    loaded = _load(workflow)
    directory = Path(workflow).resolve().parent
    if not (directory / LOCK_FILE).exists():
        raise ValidationError(
            f"{workflow} has no {LOCK_FILE} beside it",
            code="pack.unlocked",
            hint=f"run `agentctl pack lock {workflow}` after reviewing its packs",
        )
    packs, problems = resolve_packs(loaded, use_lock=True)
    if any(p.is_error for p in problems):
        raise ValidationError(
            f"{workflow}: its packs do not match {LOCK_FILE} "
            f"({sum(p.is_error for p in problems)} error(s))",
            code="pack.invalid",
            diagnostics=[*loaded.diagnostics, *problems],
            hint="review the change, then run `agentctl pack lock` to pin it",
        )
    return {
        "lockFile": str(directory / LOCK_FILE),
        "packs": [p.to_json() for p in packs],
        "diagnostics": [*loaded.diagnostics, *problems],
    }
