"""Secret references the run could never resolve are refused by ``check``.

Every position that holds a secret reference is listed here once. ``{file}`` references
need a ``policy.secretFileRoots`` entry and ``{process}`` references an executable whose
basename is in ``policy.secretProcessAllowlist``; without them the one resolver
(:mod:`agentctl.policy.secrets`) refuses the reference at run time, so the compiler
reports it first, with the path and line, as ``invalid_secret_reference``. Whether a file
exists or a variable is set is a fact of the machine that runs the workflow, not of the
document, so that is still found when the run is prepared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import PurePath
from typing import Any

from agentctl.compiler.drafts import Reporter, sub_path

__all__ = ["check_secret_references", "secret_reference_positions"]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def secret_reference_positions(spec: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(document path, reference)`` for every secret reference in ``spec``."""
    for name, provider in _mapping(spec.get("providers")).items():
        base = sub_path("spec.providers", name)
        if _mapping(provider).get("credential") is not None:
            yield sub_path(base, "credential"), provider["credential"]
        for field in ("headers", "env"):
            for key, ref in _mapping(_mapping(provider).get(field)).items():
                yield sub_path(base, field, key), ref
    for name, action in _mapping(spec.get("actions")).items():
        for key, ref in _mapping(_mapping(action).get("env")).items():
            yield sub_path("spec.actions", name, "env", key), ref
    for name, server in _mapping(spec.get("mcpServers")).items():
        for field in ("headers", "env"):
            for key, ref in _mapping(_mapping(server).get(field)).items():
                yield sub_path("spec.mcpServers", name, field, key), ref
    for name, peer in _mapping(spec.get("a2aPeers")).items():
        for key, ref in _mapping(_mapping(peer).get("headers")).items():
            yield sub_path("spec.a2aPeers", name, "headers", key), ref
    for name, tool in _mapping(spec.get("tools")).items():
        for index, ref in enumerate(_mapping(tool).get("secrets") or ()):
            yield sub_path("spec.tools", name, "secrets", index), ref
    network = _mapping(_mapping(spec.get("policy")).get("network"))
    if network.get("customCa") is not None:
        yield "spec.policy.network.customCa", network["customCa"]


def check_secret_references(spec: Mapping[str, Any], reporter: Reporter) -> None:
    policy = _mapping(spec.get("policy"))
    roots = list(policy.get("secretFileRoots") or ())
    allowed = set(policy.get("secretProcessAllowlist") or ())
    for path, ref in secret_reference_positions(spec):
        ref = _mapping(ref)
        if "file" in ref and not roots:
            reporter.error(
                "invalid_secret_reference",
                f"{path}: a `file` secret reference needs a policy.secretFileRoots entry",
                sub_path(path, "file"),
                help="add the directory holding the file to spec.policy.secretFileRoots",
            )
        process = _mapping(ref.get("process"))
        command = str(process.get("command") or "")
        if "process" in ref and PurePath(command).name not in allowed:
            basename = PurePath(command).name
            reporter.error(
                "invalid_secret_reference",
                f"{path}: secret process `{command}` is not in policy.secretProcessAllowlist",
                sub_path(path, "process", "command"),
                help=f"add `{basename}` to spec.policy.secretProcessAllowlist",
            )
