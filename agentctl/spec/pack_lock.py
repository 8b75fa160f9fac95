"""The pack lock file ``agentctl.pack.lock`` (``agentctl.dev/pack-lock/v1``).

It sits beside the workflow file and pins, per pack, the exact manifest bytes
(``integrity``) and every file of the pack directory (``content``), with the trust decision
taken when it was written. Once it exists, a pack whose bytes differ is refused before any
run exists; ``agentctl pack lock`` rewrites it after a reviewed change.

agentctl writes canonical JSON (sorted keys, two-space indent), so a diff shows what
changed. It reads YAML, as upstream writes it (JSON is YAML too): ``packs`` as a list of
entries or a mapping from pack name to entry, and ``content`` optional (upstream pins the
manifest bytes only; without ``content`` the pack's other files are not compared).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar

from pydantic.dataclasses import dataclass

from agentctl.errors import PersistenceError, UsageError
from agentctl.input_files import read_input_text
from agentctl.spec.result import MAX_DOCUMENT_BYTES
from agentctl.typed_records import CAMEL, CamelRecord

__all__ = [
    "LOCK_API_VERSION",
    "LOCK_FILE",
    "LockProblem",
    "LockedPack",
    "PackSource",
    "read_lock",
    "write_lock",
]

LOCK_API_VERSION = "agentctl.dev/pack-lock/v1"
LOCK_FILE = "agentctl.pack.lock"


@dataclass(frozen=True, slots=True, config=CAMEL)
class PackSource(CamelRecord):
    """Where the pack was found: its directory or manifest, relative to the workflow."""

    path: str = ""


@dataclass(frozen=True, slots=True, kw_only=True, config=CAMEL)
class LockedPack(CamelRecord):
    """One pinned pack (built by keyword).

    The defaults are for locks written before every key was: they read as unsigned, with
    no trust decision and no items."""

    record_name: ClassVar[str] = "pack lock entry"

    name: str
    version: str
    source: PackSource = PackSource()
    manifest: str = ""
    integrity: str
    content: str = ""
    signed: bool = False
    trust: str = ""
    items: dict[str, list[str]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return self.source.path


class LockProblem(ValueError):
    """The lock file exists but cannot be read as a pack lock."""


def read_lock(directory: Path) -> dict[str, LockedPack] | None:
    """The lock beside a workflow, by pack name; ``None`` when there is none."""
    path = directory / LOCK_FILE
    if not os.path.lexists(path):
        return None
    try:
        text = read_input_text(path, "pack lock", limit=MAX_DOCUMENT_BYTES)
    except UsageError as exc:
        raise LockProblem(exc.message) from exc
    try:
        data = _parse(text, path)
        if data.get("apiVersion") != LOCK_API_VERSION:
            raise LockProblem(
                f"{path} has apiVersion {data.get('apiVersion')!r}, expected {LOCK_API_VERSION}"
            )
        entries = data.get("packs") or ()
        if isinstance(entries, dict):  # upstream's mapping form: name -> entry
            entries = [{"name": name, **entry} for name, entry in entries.items()]
        return {entry["name"]: LockedPack.from_json(entry) for entry in entries}
    except PersistenceError as exc:
        raise LockProblem(f"{path} is not a valid pack lock: {exc.message}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, LockProblem):
            raise
        raise LockProblem(f"{path} is not a valid pack lock: {exc}") from exc


def _parse(text: str, path: Path) -> dict[str, Any]:
    """The lock document: YAML (upstream's form) or JSON (ours, a subset of YAML)."""
    from agentctl.spec.yaml_source import YamlProblem, parse_yaml

    try:
        value = parse_yaml(text).value
    except YamlProblem as exc:
        where = f":{exc.line}" if exc.line else ""
        raise LockProblem(f"{path}{where} is not valid YAML or JSON: {exc.message}") from None
    if not isinstance(value, dict):
        raise LockProblem(f"{path} is not a valid pack lock: expected a mapping")
    return value


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
