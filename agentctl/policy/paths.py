"""Workspace path rules (docs/workflow-language.md): where built-in reads and writes may go.

- Any ``..`` component is rejected outright, before resolution, so a path never even
  appears to leave its root and come back.
- Relative paths are relative to the workspace root, itself relative to the run's base
  directory (``--workspace``, else the workflow file's directory).
- Reads must resolve inside the workspace root; writes inside one of the writable roots
  (each relative to the workspace root, or absolute). Resolution follows existing symlinks
  and keeps missing leaves as written, so a symlink pointing out of a root is caught.
- No writable roots means every write is denied.
- A writable root declared inside the workspace (``out``) must also resolve inside it:
  if ``out`` is a symlink to ``/elsewhere``, the root is refused and nothing under it is
  writable or scanned for artifacts. A root declared outside the workspace (an absolute
  path elsewhere) is a deliberate choice and is kept.

The check is made when the effect is prepared; a symlink swapped in between the check and
the write is outside what a path policy can prevent (this is not a sandbox).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePath

from agentctl.errors import PolicyDeniedError, TaskError

__all__ = ["WorkspacePolicy"]


class WorkspacePolicy:
    """The read and write boundaries of one run."""

    def __init__(
        self,
        base_dir: Path,
        workspace_root: str = ".",
        writable_roots: Sequence[str] = (),
    ) -> None:
        self.base_dir = Path(base_dir)
        self.workspace_root = (self.base_dir / workspace_root).resolve(strict=False)
        kept: list[Path] = []
        #: Roots declared inside the workspace that a symlink takes out of it: declared
        #: text -> where they lead. Writes under them are refused, naming the root.
        self.escaped_roots: dict[str, Path] = {}
        for root in writable_roots:
            declared = Path(os.path.normpath(self.workspace_root / root))
            resolved = (self.workspace_root / root).resolve(strict=False)
            if declared.is_relative_to(self.workspace_root) and not resolved.is_relative_to(
                self.workspace_root
            ):
                self.escaped_roots[str(root)] = resolved
            else:
                kept.append(resolved)
        self.writable_roots: tuple[Path, ...] = tuple(kept)

    def resolve_read(self, path: str) -> Path:
        """The real path a read of ``path`` touches, or ``PolicyDeniedError``."""
        resolved = self._resolve("read", path)
        if not resolved.is_relative_to(self.workspace_root):
            raise PolicyDeniedError(
                f"policy denied effect: read path `{path}` resolves to `{resolved}`, "
                f"outside the workspace root `{self.workspace_root}`",
                code="policy.path_outside_workspace",
                hint="read files inside the workspace root, or change spec.policy.workspaceRoot",
            )
        return resolved

    def resolve_write(self, path: str) -> Path:
        """The real path a write of ``path`` replaces, or ``PolicyDeniedError``."""
        resolved = self._resolve("write", path)
        for root, leads_to in self.escaped_roots.items():
            if resolved.is_relative_to(leads_to):
                raise PolicyDeniedError(
                    f"policy denied effect: write path `{path}` is under writable root "
                    f"`{root}`, which resolves to `{leads_to}`, outside the workspace root "
                    f"`{self.workspace_root}`",
                    code="policy.root_outside_workspace",
                    hint=f"make `{root}` a real directory inside the workspace, or declare "
                    "the outside directory as an absolute writable root on purpose",
                )
        if not self.writable_roots:
            why = (
                "every spec.policy.writableRoots entry resolves outside the workspace"
                if self.escaped_roots
                else "spec.policy.writableRoots is empty"
            )
            raise PolicyDeniedError(
                f"policy denied effect: write path `{path}` is not writable: "
                f"{why}, so every write is denied",
                code="policy.path_not_writable",
                hint="add a root containing the path to spec.policy.writableRoots",
            )
        if not any(resolved.is_relative_to(root) for root in self.writable_roots):
            roots = ", ".join(f"`{root}`" for root in self.writable_roots)
            raise PolicyDeniedError(
                f"policy denied effect: write path `{path}` resolves to `{resolved}`, "
                f"outside every writable root ({roots})",
                code="policy.path_not_writable",
                hint="write inside a writable root, or add one to spec.policy.writableRoots",
            )
        return resolved

    def _resolve(self, operation: str, path: str) -> Path:
        if not path or "\0" in path:
            raise TaskError(f"{operation} path {path!r} is not a valid path", code="input.invalid")
        if ".." in PurePath(path).parts:
            raise PolicyDeniedError(
                f"policy denied effect: {operation} path `{path}` contains a `..` component",
                code="policy.path_parent_component",
                hint="name the file from the workspace root without `..`",
            )
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.workspace_root / candidate
        try:
            return candidate.resolve(strict=False)
        except (OSError, RuntimeError) as exc:
            # RuntimeError is how Python 3.11 reports a symlink loop.
            raise TaskError(
                f"{operation} path `{path}` cannot be resolved: {exc}",
                code="file.unresolvable",
            ) from exc
