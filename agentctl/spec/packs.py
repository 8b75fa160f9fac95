"""Local packs: read, verify and trust each ``spec.packs`` entry, then load its items.

For every pack a workflow declares, before anything compiles:

1. a ``git`` or ``https`` source is refused (this agentctl works offline);
2. the manifest is found under the workflow's directory (``path`` names the manifest or
   its directory, which then holds ``agentctl-pack.yaml``) and hashed: ``integrity`` is
   ``sha256:`` over the manifest bytes, ``content`` over every file of the pack directory;
3. a declared ``integrity`` must match, and when ``agentctl.pack.lock`` exists the pack
   must match its entry there exactly — a pack whose bytes changed after locking is
   refused, so no run is ever created from unreviewed pack content;
4. ``packTrust`` decides about unsigned packs (``deny`` / ``warn`` / ``allow``); signatures
   cannot be verified offline, so a signed pack counts as unsigned (with a warning), and a
   pack with process actions also needs ``allowUnsignedProcess: true``;
5. the items are validated with the workflow's own models (diagnostics point into the
   manifest), renamed ``<pack>.<item>`` — references inside the pack are renamed with them
   — and added to the workflow; a name that is already taken is refused.

``policyDefaults`` are validated and reported, never applied: a pack cannot weaken the
policy of the workflow that uses it. The merged document is what compiles, so pack items
count in the workflow digest and a run stores them with its workflow.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentctl.diagnostics import Diagnostic
from agentctl.errors import UsageError
from agentctl.input_files import read_input_bytes
from agentctl.spec.pack_items import ITEM_SECTIONS, pack_items
from agentctl.spec.pack_lock import LOCK_FILE, LockedPack, LockProblem, PackSource, read_lock
from agentctl.spec.pack_manifest import MANIFEST_FILE, PackManifest, satisfies, version_matches
from agentctl.spec.result import MAX_DOCUMENT_BYTES, LoadResult
from agentctl.spec.source_map import SourceMap, diagnostic_at, join_path
from agentctl.spec.validate import validate_document
from agentctl.spec.yaml_source import YamlProblem, parse_yaml

__all__ = [
    "ResolvedPack",
    "apply_packs",
    "lock_required",
    "require_lock",
    "resolve_packs",
]

_PROCESS_KINDS = frozenset({"builtin.shell.exec", "extension.process"})
_MAX_PACK_FILES = 4096
_MAX_PACK_BYTES = 64 << 20


@dataclass
class ResolvedPack:
    """One verified pack and the items it adds (by qualified name)."""

    name: str
    version: str
    path: str
    manifest: str
    integrity: str
    content: str
    signed: bool
    trust: str
    policy_defaults: dict[str, Any]
    source: SourceMap = field(default_factory=lambda: SourceMap(""))
    """Positions in the manifest, for diagnostics about the pack's items."""
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``{"actions": {qualified: definition}, "agents": …, "tools": …, "subworkflows": …}``."""

    def locked(self) -> LockedPack:
        return LockedPack(
            name=self.name,
            version=self.version,
            source=PackSource(self.path),
            manifest=self.manifest,
            integrity=self.integrity,
            content=self.content,
            signed=self.signed,
            trust=self.trust,
            items={kind: sorted(names) for kind, names in self.items.items() if names},
        )

    def to_json(self) -> dict[str, Any]:
        out = self.locked().to_json()
        out["policyDefaults"] = self.policy_defaults
        return out


# `--locked` (a global flag): every workflow with packs must have its lock, and nothing may
# rewrite it. Set once per CLI process by require_lock().
_LOCKED = [False]


def require_lock(on: bool) -> None:
    """Turn ``--locked`` on or off for this process."""
    _LOCKED[0] = on


def lock_required() -> bool:
    """Whether ``--locked`` is on."""
    return _LOCKED[0]


def _version_ok(found: str, wanted: str) -> bool:
    """Whether the pack version ``found`` is what a reference asks for (exact or a range)."""
    try:
        return version_matches(found, wanted)
    except ValueError:
        return False


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class _Packs:
    def __init__(self, loaded: LoadResult, use_lock: bool) -> None:
        assert loaded.document is not None
        self.loaded = loaded
        self.source = loaded.source
        self.data = loaded.document.model_dump(mode="json", by_alias=True, exclude_unset=True)
        self.spec: dict[str, Any] = self.data["spec"]
        self.directory = Path(loaded.path).resolve().parent
        self.beside = os.path.dirname(loaded.path)
        self.trust: Mapping[str, Any] = self.spec.get("packTrust") or {}
        self.problems: list[Diagnostic] = []
        self.lock: dict[str, LockedPack] | None = None
        self.locking = not use_lock
        self.manifest_source = SourceMap("")
        # (pack, its manifest's dependencies, where it is declared), checked once all are in.
        self.dependencies: list[tuple[str, dict[str, str], str]] = []
        if use_lock:
            try:
                self.lock = read_lock(self.directory)
            except LockProblem as exc:
                self.error("incompatible_state", str(exc), "spec.packs", "run `agentctl pack lock`")
            if self.lock is None and _LOCKED[0] and self.spec.get("packs"):
                self.error(
                    "incompatible_state",
                    f"--locked: the workflow declares packs but there is no {LOCK_FILE} beside it",
                    "spec.packs",
                    "run `agentctl packs lock FILE` (without --locked), review and commit it",
                )

    def error(self, code: str, message: str, path: str, help: str | None = None) -> None:
        self.problems.append(diagnostic_at(code, message, path, self.source, help))

    def warning(self, code: str, message: str, path: str, help: str | None = None) -> None:
        self.problems.append(diagnostic_at(code, message, path, self.source, help, "warning"))

    # -- locating and hashing ---------------------------------------------------------

    def _manifest_path(self, ref: Mapping[str, Any], base: str) -> Path | None:
        """The pack's directory or manifest file, resolved inside the workflow's directory."""
        source = ref.get("source") or {}
        if "git" in source or "url" in source:
            kind = "git" if "git" in source else "https"
            self.error(
                "unsupported_capability",
                f"pack `{ref.get('name')}` comes from a {kind} source, which is not supported "
                "offline",
                join_path(base, "source"),
                "vendor the pack into a directory beside the workflow and declare it with "
                "`path` and `integrity` (or `source: {path: …}` and a lock file)",
            )
            return None
        relative = str(ref.get("path") or source.get("path") or "")
        target = self.directory / relative
        try:
            resolved = target.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            self.error(
                "missing_reference",
                f"pack `{ref.get('name')}`: cannot read {relative}: "
                f"{getattr(exc, 'strerror', None) or exc}",
                join_path(base, "path" if ref.get("path") else "source"),
                "the path is relative to the workflow file's directory",
            )
            return None
        if not resolved.is_relative_to(self.directory):
            self.error(
                "policy_denied",
                f"pack `{ref.get('name')}` resolves outside the workflow's directory ({resolved})",
                join_path(base, "path" if ref.get("path") else "source"),
                "keep packs in a directory beside the workflow; a symlink may not lead out",
            )
            return None
        return resolved

    def _content_digest(self, pack_dir: Path, name: str, base: str) -> str | None:
        """SHA-256 over every file of the pack directory: relative path and bytes."""
        entries: list[str] = []
        total = 0
        for root, dirs, files in os.walk(pack_dir, followlinks=False):
            dirs.sort()
            for file_name in sorted(files):
                file = Path(root) / file_name
                relative = file.relative_to(pack_dir).as_posix()
                if file.is_symlink() and not file.resolve().is_relative_to(pack_dir):
                    self.error(
                        "policy_denied",
                        f"pack `{name}` file {relative} is a symlink that leads out of the pack",
                        base,
                        "replace the symlink with the file itself",
                    )
                    return None
                try:
                    data = read_input_bytes(
                        file,
                        f"pack `{name}` file",
                        limit=max(_MAX_PACK_BYTES - total, 0),
                        hint="keep only the pack's own regular files in its directory "
                        "(64 MiB in all)",
                    )
                except UsageError as exc:
                    self.error("schema_violation", exc.message, base, exc.hint)
                    return None
                total += len(data)
                entries.append(f"{relative}\0{_sha256(data)}\n")
                if len(entries) > _MAX_PACK_FILES or total > _MAX_PACK_BYTES:
                    self.error(
                        "schema_violation",
                        f"pack `{name}` has more than {_MAX_PACK_FILES} files or 64 MiB",
                        base,
                        "keep only the pack's own files in its directory",
                    )
                    return None
        return _sha256("".join(entries).encode("utf-8"))

    # -- one pack ------------------------------------------------------------------------

    def resolve(self, index: int, ref: Mapping[str, Any]) -> ResolvedPack | None:
        base = join_path("spec.packs", index)
        name = str(ref.get("name"))
        found = self._manifest_path(ref, base)
        if found is None:
            return None
        # A directory is the pack (every file in it is pinned); a file is a one-file pack.
        pack_dir = found if found.is_dir() else None
        manifest_path = found / MANIFEST_FILE if pack_dir is not None else found
        try:
            data = read_input_bytes(
                manifest_path,
                f"pack `{name}` manifest",
                limit=MAX_DOCUMENT_BYTES,
                hint=f"a pack is a directory holding its manifest as {MANIFEST_FILE}, or one "
                "manifest file (a regular file under 1 MiB)",
            )
        except UsageError as exc:
            self.error("missing_reference", exc.message, base, exc.hint)
            return None
        integrity = _sha256(data)
        declared = ref.get("integrity")
        if declared is not None and declared != integrity:
            self.error(
                "incompatible_state",
                f"pack `{name}` manifest does not match its integrity: declared {declared}, "
                f"found {integrity}",
                join_path(base, "integrity"),
                "review the pack's change, then update integrity (and run `agentctl pack lock`)",
            )
            return None
        if pack_dir is None:
            content: str | None = _sha256(f"{manifest_path.name}\0{integrity}\n".encode())
        else:
            content = self._content_digest(pack_dir, name, base)
        if content is None:
            return None
        if not self._matches_lock(name, str(ref.get("version")), integrity, content, base):
            return None
        if declared is None and self.lock is None and not self.locking:
            self.error(
                "incompatible_state",
                f"pack `{name}` has no integrity and there is no {LOCK_FILE} to pin it",
                base,
                "run `agentctl pack lock FILE` to pin it, or declare `path` and `integrity`",
            )
            return None
        label = os.path.join(self.beside, os.path.relpath(manifest_path, self.directory))
        manifest = self._manifest(data, label, name, str(ref.get("version")), base)
        if manifest is None:
            return None
        if manifest.dependencies:
            self.dependencies.append((name, dict(manifest.dependencies), base))
        signed = False
        trust = self._trust(ref, manifest, base)
        if trust is None:
            return None
        resolved = ResolvedPack(
            name=name,
            version=manifest.version,
            path=os.path.relpath(pack_dir or manifest_path, self.directory),
            manifest=os.path.relpath(manifest_path, self.directory),
            integrity=integrity,
            content=content,
            signed=signed,
            trust=trust,
            policy_defaults=dict(manifest.policy_defaults),
            source=self.manifest_source,
        )
        items, problems = pack_items(manifest, self.manifest_source)
        self.problems.extend(problems)
        if problems:
            return None
        resolved.items = items
        if not self._collisions(resolved, base):
            return None
        return resolved

    def _collisions(self, pack: ResolvedPack, base: str) -> bool:
        ok = True
        for target, defined in pack.items.items():
            taken = self.spec.get(target) or {}
            for qualified in defined:
                if qualified in taken:
                    self.error(
                        "schema_violation",
                        f"pack `{pack.name}` item `{qualified}` collides with "
                        f"spec.{target}[{qualified!r}]",
                        join_path(base, "name"),
                        "rename one of them; pack items and workflow definitions share one "
                        "namespace",
                    )
                    ok = False
        return ok

    def _matches_lock(
        self, name: str, version: str, integrity: str, content: str, base: str
    ) -> bool:
        if self.lock is None:
            return True
        entry = self.lock.get(name)
        help = f"review the pack's change, then run `agentctl pack lock` to pin it in {LOCK_FILE}"
        if entry is None:
            self.error("incompatible_state", f"pack `{name}` is not in {LOCK_FILE}", base, help)
            return False
        changed = [
            what
            for what, locked, now in (
                # The lock holds the version found; the workflow may ask for a range.
                (
                    "version",
                    entry.version,
                    entry.version if _version_ok(entry.version, version) else "",
                ),
                ("manifest", entry.integrity, integrity),
                # A lock written by upstream pins the manifest only (no `content`).
                ("files", entry.content or content, content),
            )
            if locked != now
        ]
        if changed:
            self.error(
                "incompatible_state",
                f"pack `{name}` changed after it was locked ({', '.join(changed)} differ from "
                f"{LOCK_FILE}; locked manifest {entry.integrity[:19]}…, now {integrity[:19]}…)",
                base,
                help,
            )
            return False
        return True

    def _manifest(
        self, data: bytes, label: str, name: str, version: str, base: str
    ) -> PackManifest | None:
        try:
            parsed = parse_yaml(data.decode("utf-8"))
        except UnicodeDecodeError:
            self.problems.append(
                Diagnostic(code="yaml_syntax", message="the manifest is not UTF-8", file=label)
            )
            return None
        except YamlProblem as problem:
            self.problems.append(
                Diagnostic(
                    code=problem.code,
                    message=problem.message,
                    file=label,
                    line=problem.line,
                    column=problem.column,
                )
            )
            return None
        source = SourceMap(label, parsed.positions)
        self.manifest_source = source
        try:
            manifest = PackManifest.model_validate(parsed.value, by_alias=True, by_name=False)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                path = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function"))
                # An unknown key is a schema_violation too (upstream's code set); the
                # message says which key.
                code = "schema_violation"
                if path == "apiVersion":
                    code = "unsupported_version"
                self.problems.append(
                    diagnostic_at(
                        code,
                        f"pack manifest: {path or 'document'}: {error['msg']}",
                        path,
                        source,
                        "a pack manifest starts with `apiVersion: agentctl.dev/pack/v1alpha1`",
                    )
                )
            return None
        if manifest.name != name or not _version_ok(manifest.version, version):
            self.error(
                "incompatible_state",
                f"pack `{name}` {version} is declared, but its manifest is `{manifest.name}` "
                f"{manifest.version}",
                base,
                "declare the name and version the manifest states",
            )
            return None
        from agentctl.version import __version__

        if not satisfies(__version__, manifest.agentctl):
            self.problems.append(
                diagnostic_at(
                    "unsupported_version",
                    f"pack `{name}` requires agentctl {manifest.agentctl}, this is {__version__}",
                    "agentctl",
                    source,
                    f"use a version of `{name}` made for agentctl {__version__}, or an "
                    f"agentctl that satisfies {manifest.agentctl} (`agentctl update` says how)",
                )
            )
            return None
        missing = [p for p in manifest.providers if p not in (self.spec.get("providers") or {})]
        if missing:
            self.error(
                "missing_reference",
                f"pack `{name}` needs the provider(s) {', '.join(missing)}, which the workflow "
                "does not define",
                base,
                "the workflow supplies providers to its packs; add them under spec.providers",
            )
            return None
        return manifest

    def _trust(self, ref: Mapping[str, Any], manifest: PackManifest, base: str) -> str | None:
        name = manifest.name
        if ref.get("signature") is not None:
            self.warning(
                "policy_denied",
                f"pack `{name}`: its signature cannot be verified offline; it is treated as "
                "unsigned",
                join_path(base, "signature"),
            )
        unsigned = str(self.trust.get("unsigned", "warn"))
        if unsigned == "deny":
            self.error(
                "policy_denied",
                f"pack `{name}` is unsigned and packTrust.unsigned is deny",
                base,
                "set spec.packTrust.unsigned to warn or allow after reviewing the pack",
            )
            return None
        processes = sorted(
            item
            for item, action in manifest.actions.items()
            if isinstance(action, Mapping) and action.get("kind") in _PROCESS_KINDS
        )
        if processes and not self.trust.get("allowUnsignedProcess", False):
            self.error(
                "policy_denied",
                f"pack `{name}` is unsigned and runs processes ({', '.join(processes)})",
                base,
                "review the pack, then set spec.packTrust.allowUnsignedProcess: true",
            )
            return None
        if unsigned == "warn":
            self.warning(
                "policy_denied",
                f"pack `{name}` is unsigned (packTrust.unsigned: warn)",
                base,
                "set spec.packTrust.unsigned: allow once the pack is reviewed",
            )
        return f"unsigned:{unsigned}"

    # -- items -----------------------------------------------------------------------------


def resolve_packs(
    loaded: LoadResult, *, use_lock: bool = True
) -> tuple[list[ResolvedPack], list[Diagnostic]]:
    """Verify every pack of a valid document; the packs that passed and every problem."""
    assert loaded.document is not None
    packs = _Packs(loaded, use_lock)
    resolved: list[ResolvedPack] = []
    seen: set[str] = set()
    for index, ref in enumerate(packs.spec.get("packs") or ()):
        if ref.get("name") in seen:
            packs.error(
                "schema_violation",
                f"pack `{ref.get('name')}` is declared twice",
                join_path(join_path("spec.packs", index), "name"),
            )
            continue
        seen.add(str(ref.get("name")))
        found = packs.resolve(index, ref)
        if found is not None:
            for other in resolved:
                for target, items in found.items.items():
                    clash = sorted(set(items) & set(other.items.get(target, {})))
                    if clash:
                        packs.error(
                            "schema_violation",
                            f"packs `{other.name}` and `{found.name}` both define "
                            f"{', '.join(clash)}",
                            join_path("spec.packs", index),
                            "pack names must not nest into each other's items",
                        )
            resolved.append(found)
    versions = {pack.name: pack.version for pack in resolved}
    for name, needs, base in packs.dependencies:
        for wanted, requirement in sorted(needs.items()):
            have = versions.get(wanted)
            if have is not None and satisfies(have, requirement):
                continue
            found_text = f"{wanted} {have} is declared" if have else "it is not declared"
            packs.error(
                "missing_reference",
                f"pack `{name}` depends on `{wanted}` {requirement}, but {found_text} in "
                "spec.packs",
                base,
                f"declare `{wanted}` at a version that satisfies {requirement} in spec.packs "
                "(agentctl verifies pack dependencies; it does not fetch them)",
            )
    return resolved, packs.problems


@dataclass(frozen=True)
class PackedSourceMap(SourceMap):
    """The workflow's positions, plus each pack item's positions in its manifest.

    A diagnostic the compiler finds in ``spec.agents["example.utility.crier"]`` is located
    in the pack's manifest at ``agents.crier``, the line a user can edit."""

    items: Mapping[str, tuple[SourceMap, str]] = field(default_factory=dict)
    """Merged item path (``spec.agents["p.x"]``) -> (manifest map, manifest path)."""

    def where(self, path: str) -> tuple[str, tuple[int, int] | None]:
        for prefix, (manifest, target) in self.items.items():
            if path == prefix or path.startswith((prefix + ".", prefix + "[")):
                return manifest.file, manifest.locate(target + path[len(prefix) :])
        return super().where(path)


def apply_packs(loaded: LoadResult, *, use_lock: bool = True) -> LoadResult:
    """``loaded`` with every pack verified and its items added to the document.

    Any problem with a pack is an error on the result (its ``document`` becomes ``None``),
    so nothing downstream compiles or runs a workflow whose packs did not verify."""
    if loaded.document is None or not loaded.document.spec.packs or not loaded.ok:
        return loaded
    resolved, problems = resolve_packs(loaded, use_lock=use_lock)
    diagnostics = [*loaded.diagnostics, *problems]
    if any(p.is_error for p in problems):
        return dataclasses.replace(loaded, document=None, diagnostics=diagnostics)
    data = loaded.document.model_dump(mode="json", by_alias=True, exclude_unset=True)
    spec = data["spec"]
    located: dict[str, tuple[SourceMap, str]] = {}
    sections = {target: section for section, target in ITEM_SECTIONS.items()}
    for pack in resolved:
        for target, items in pack.items.items():
            if items:
                spec[target] = {**(spec.get(target) or {}), **items}
            for qualified in items:
                local = qualified[len(pack.name) + 1 :]
                located[join_path(join_path("spec", target), qualified)] = (
                    pack.source,
                    join_path(sections[target], local),
                )
    workflow = loaded.source or SourceMap(loaded.path)
    source = PackedSourceMap(workflow.file, workflow.positions, located)
    document, invalid = validate_document(data, source)
    return dataclasses.replace(
        loaded, document=document, source=source, diagnostics=[*diagnostics, *invalid]
    )
