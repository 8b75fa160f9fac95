"""Workspace path rules (reference §18.1): where built-in reads and writes may go.

- Any ``..`` component is rejected outright, before resolution, so a path never even
  appears to leave its root and come back.
- Relative paths are relative to the workspace root, itself relative to the run's base
  directory (``--workspace``, else the workflow file's directory).
- Reads must resolve inside the workspace root; writes inside one of the writable roots
  (each relative to the workspace root, or absolute). Resolution follows existing symlinks
  and keeps missing leaves as written, so a symlink pointing out of a root is caught.
- No writable roots means every write is denied.

The check is made when the effect is prepared; a symlink swapped in between the check and
the write is outside what a path policy can prevent (this is not a sandbox).
"""

from __future__ import annotations

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
        self.writable_roots: tuple[Path, ...] = tuple(
            (self.workspace_root / root).resolve(strict=False) for root in writable_roots
        )

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
        if not self.writable_roots:
            raise PolicyDeniedError(
                f"policy denied effect: write path `{path}` is not writable: "
                "spec.policy.writableRoots is empty, so every write is denied",
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
