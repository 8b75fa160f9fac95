"""``agentctl pack lock`` and ``pack verify``: pin a workflow's packs, and check the pins."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentctl.errors import ValidationError
from agentctl.spec.pack_lock import LOCK_FILE, write_lock
from agentctl.spec.packs import resolve_packs
from agentctl.spec.result import LoadResult

__all__ = [
    "inspect_manifest",
    "lock_packs",
    "update_lock",
    "verify_manifest",
    "verify_packs",
]


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
    _refuse_when_locked(workflow)
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


def _manifest_document(manifest: str) -> tuple[bytes, Any]:
    """The manifest's bytes and its validated envelope (exit 2 naming the problem)."""
    from pydantic import ValidationError as ModelError

    from agentctl.input_files import read_input_bytes
    from agentctl.spec.pack_manifest import PackManifest
    from agentctl.spec.result import MAX_DOCUMENT_BYTES
    from agentctl.spec.yaml_source import YamlProblem, parse_yaml

    path = Path(manifest)
    if path.is_dir():
        from agentctl.spec.pack_manifest import MANIFEST_FILE

        path = path / MANIFEST_FILE
    data = read_input_bytes(path, "pack manifest", limit=MAX_DOCUMENT_BYTES)
    try:
        value = parse_yaml(data.decode("utf-8")).value
        return data, PackManifest.model_validate(value, by_alias=True, by_name=False)
    except (UnicodeDecodeError, YamlProblem) as exc:
        problem = getattr(exc, "message", None) or str(exc)
        raise ValidationError(
            f"{path} is not a readable pack manifest: {problem}", code="pack.invalid"
        ) from None
    except ModelError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise ValidationError(
            f"{path} is not a valid pack manifest: {where}: {first['msg']}",
            code="pack.invalid",
            hint="a pack manifest starts with `apiVersion: agentctl.dev/pack/v1alpha1`",
        ) from None


def inspect_manifest(manifest: str) -> dict[str, Any]:
    """What a pack manifest declares, its integrity, and whether this agentctl suits it."""
    import hashlib

    from agentctl.spec.pack_manifest import satisfies
    from agentctl.version import __version__

    data, parsed = _manifest_document(manifest)
    items = {
        kind: sorted(f"{parsed.name}.{item}" for item in getattr(parsed, kind))
        for kind in ("actions", "agents", "tools", "workflows")
    }
    return {
        "manifest": manifest,
        "name": parsed.name,
        "version": parsed.version,
        "description": parsed.description,
        "integrity": "sha256:" + hashlib.sha256(data).hexdigest(),
        "agentctl": {
            "requires": parsed.agentctl,
            "current": __version__,
            "satisfied": satisfies(__version__, parsed.agentctl),
        },
        "dependencies": dict(parsed.dependencies),
        "items": items,
        "capabilities": list(parsed.capabilities),
        "providers": list(parsed.providers),
        "policyDefaults": dict(parsed.policy_defaults),
    }


def verify_manifest(manifest: str, integrity: str) -> dict[str, Any]:
    """Check a manifest's bytes against ``integrity`` (``sha256:`` + 64 hex); exit 2 if not."""
    inspected = inspect_manifest(manifest)
    if inspected["integrity"] != integrity.strip():
        raise ValidationError(
            f"pack `{inspected['name']}` manifest {manifest} does not match the integrity "
            f"given: expected {integrity.strip()}, found {inspected['integrity']}",
            code="pack.invalid",
            hint="review the manifest's change before trusting it; `agentctl packs inspect` "
            "prints its current integrity",
        )
    return {
        "manifest": manifest,
        "name": inspected["name"],
        "version": inspected["version"],
        "integrity": inspected["integrity"],
        "verified": True,
    }


def update_lock(workflow: str, only: Sequence[str] = ()) -> dict[str, Any]:
    """Re-pin the workflow's packs (or only those named) in ``agentctl.pack.lock``.

    Local packs have nothing to fetch: updating is verifying the current bytes and pinning
    them, keeping the other entries' pins when ``only`` names some packs."""
    _refuse_when_locked(workflow)
    loaded = _load(workflow)
    packs, problems = resolve_packs(loaded, use_lock=False)
    names = {p.name for p in packs}
    unknown = sorted(set(only) - names - {str(r.get("name")) for r in _declared(loaded)})
    if unknown:
        raise ValidationError(
            f"{workflow} declares no pack `{unknown[0]}`",
            code="pack.invalid",
            hint="name a pack from spec.packs with --pack",
        )
    if any(p.is_error for p in problems):
        raise ValidationError(
            f"{workflow}: its packs cannot be updated ({sum(p.is_error for p in problems)} "
            "error(s))",
            code="pack.invalid",
            diagnostics=[*loaded.diagnostics, *problems],
            hint="fix the diagnostics above and run `agentctl packs update` again",
        )
    chosen = [p for p in packs if not only or p.name in only]
    path = write_lock(Path(workflow).resolve().parent, [p.locked() for p in chosen])
    return {
        "lockFile": str(path),
        "packs": [p.to_json() for p in chosen],
        "diagnostics": [*loaded.diagnostics, *problems],
    }


def _declared(loaded: LoadResult) -> list[dict[str, Any]]:
    assert loaded.document is not None
    return [p.model_dump(by_alias=True) for p in loaded.document.spec.packs]


def _refuse_when_locked(workflow: str) -> None:
    from agentctl.errors import UsageError
    from agentctl.spec.packs import lock_required

    if lock_required():
        raise UsageError(
            f"--locked: the lock of {workflow} may not be rewritten",
            code="pack.locked",
            hint="run the command without --locked to pin a reviewed change",
        )
