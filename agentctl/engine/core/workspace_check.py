"""What ``check`` and ``plan`` verify about a workspace given with ``--workspace``.

A run resolves action working directories and agent instruction files against the
workspace root (``--workspace``, then ``policy.workspaceRoot``). Given the directory the
workflow will run in, the authoring commands find a missing or escaping path before any
run exists, located like every other diagnostic (``missing_reference`` for a path that is
not there, ``policy_denied`` for one that leaves the workspace root).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentctl.diagnostics import Diagnostic
from agentctl.errors import AgentctlError, UsageError
from agentctl.policy.paths import WorkspacePolicy
from agentctl.spec.models_policy import Policy
from agentctl.spec.source_map import SourceMap, diagnostic_at, join_path

__all__ = ["check_workspace"]

_PROCESS_KINDS = ("builtin.shell.exec", "extension.process")


def check_workspace(
    spec: Mapping[str, Any], workspace: Path, source: SourceMap | None
) -> tuple[Path, list[Diagnostic]]:
    """The workspace root and the diagnostics for paths the run would not find there."""
    if not workspace.is_dir():
        raise UsageError(
            f"workspace {workspace} is not a directory",
            hint="pass an existing directory with --workspace",
        )
    policy = spec.get("policy") or {}
    paths = WorkspacePolicy(
        workspace.resolve(),
        str(policy.get("workspaceRoot") or Policy.default_of("workspace_root")),
        [str(root) for root in policy.get("writableRoots") or []],
    )
    if not paths.workspace_root.is_dir():
        raise UsageError(
            f"workspace root {paths.workspace_root} (policy.workspaceRoot under {workspace}) "
            "is not a directory",
            hint="create it, or fix spec.policy.workspaceRoot",
        )
    found: list[Diagnostic] = []

    def verify(path_text: str, field_path: str, what: str, want_dir: bool) -> None:
        try:
            target = paths.resolve_read(path_text)
        except AgentctlError as exc:
            found.append(diagnostic_at("policy_denied", exc.message, field_path, source, exc.hint))
            return
        exists = target.is_dir() if want_dir else target.is_file()
        if not exists:
            kind = "directory" if want_dir else "file"
            found.append(
                diagnostic_at(
                    "missing_reference",
                    f"{what} `{path_text}` is not a {kind} in the workspace {paths.workspace_root}",
                    field_path,
                    source,
                    help="create it, or run with the --workspace that holds it",
                )
            )

    for name, action in sorted((spec.get("actions") or {}).items()):
        cwd = action.get("cwd")
        if action.get("kind") in _PROCESS_KINDS and isinstance(cwd, str):
            path = join_path(join_path("spec.actions", name), "cwd")
            verify(cwd, path, f"action `{name}` cwd", want_dir=True)
    for name, agent in sorted((spec.get("agents") or {}).items()):
        file = agent.get("instructionsFile")
        if isinstance(file, str):
            path = join_path(join_path("spec.agents", name), "instructionsFile")
            verify(file, path, f"agent `{name}` instructionsFile", want_dir=False)
    return paths.workspace_root, found
