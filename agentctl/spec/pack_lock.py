"""The pack lock file ``agentctl.pack.lock`` (``agentctl.dev/pack-lock/v1``).

It sits beside the workflow file and pins, per pack, the exact manifest bytes
(``integrity``) and every file of the pack directory (``content``), with the trust decision
taken when it was written. Once it exists, a pack whose bytes differ is refused before any
run exists; ``agentctl pack lock`` rewrites it after a reviewed change.

The file is canonical JSON (sorted keys, two-space indent), so a diff shows what changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOCK_API_VERSION", "LOCK_FILE", "LockProblem", "LockedPack", "read_lock", "write_lock"]

LOCK_API_VERSION = "agentctl.dev/pack-lock/v1"
LOCK_FILE = "agentctl.pack.lock"


@dataclass(frozen=True, slots=True)
class LockedPack:
    """One pinned pack."""

    name: str
    version: str
    path: str
    manifest: str
    integrity: str
    content: str
    signed: bool
    trust: str
    items: Mapping[str, Sequence[str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "source": {"path": self.path},
            "manifest": self.manifest,
            "integrity": self.integrity,
            "content": self.content,
            "signed": self.signed,
            "trust": self.trust,
            "items": {kind: list(names) for kind, names in self.items.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LockedPack:
        return cls(
            name=str(data["name"]),
            version=str(data["version"]),
            path=str((data.get("source") or {}).get("path", "")),
            manifest=str(data.get("manifest", "")),
            integrity=str(data["integrity"]),
            content=str(data["content"]),
            signed=bool(data.get("signed", False)),
            trust=str(data.get("trust", "")),
            items={str(k): [str(n) for n in v] for k, v in (data.get("items") or {}).items()},
        )


class LockProblem(ValueError):
    """The lock file exists but cannot be read as a pack lock."""


def read_lock(directory: Path) -> dict[str, LockedPack] | None:
    """The lock beside a workflow, by pack name; ``None`` when there is none."""
    path = directory / LOCK_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockProblem(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(text)
        if data.get("apiVersion") != LOCK_API_VERSION:
            raise LockProblem(
                f"{path} has apiVersion {data.get('apiVersion')!r}, expected {LOCK_API_VERSION}"
            )
        return {entry["name"]: LockedPack.from_json(entry) for entry in data.get("packs") or ()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, LockProblem):
            raise
        raise LockProblem(f"{path} is not a valid pack lock: {exc}") from exc


def write_lock(directory: Path, packs: Sequence[LockedPack]) -> Path:
    """Pin ``packs`` in the lock beside the workflow; returns its path.

    Workflows in one directory share the lock: entries for other packs are kept, entries
    for these packs are replaced. An unreadable lock is replaced whole."""
    path = directory / LOCK_FILE
    try:
        entries = dict(read_lock(directory) or {})
    except LockProblem:
        entries = {}
    entries.update((p.name, p) for p in packs)
    document = {
        "apiVersion": LOCK_API_VERSION,
        "packs": [entries[name].to_json() for name in sorted(entries)],
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
