"""Workspace path policy (docs/workflow-language.md) on a real directory tree with real symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentctl.errors import PolicyDeniedError, TaskError
from agentctl.policy.paths import WorkspacePolicy


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """base/ws is the workspace root, base/ws/out a writable root, base/outside elsewhere."""
    root = tmp_path / "base"
    (root / "ws" / "out").mkdir(parents=True)
    (root / "ws" / "notes.txt").write_text("notes")
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text("secret")
    return root.resolve()


def test_relative_reads_resolve_inside_the_workspace_root(base: Path) -> None:
    policy = WorkspacePolicy(base, "ws")
    assert policy.resolve_read("notes.txt") == base / "ws" / "notes.txt"
    assert policy.resolve_read("./sub/missing.txt") == base / "ws" / "sub" / "missing.txt"
    assert policy.resolve_read(str(base / "ws" / "notes.txt")) == base / "ws" / "notes.txt"


def test_default_workspace_root_is_the_base_dir(base: Path) -> None:
    assert WorkspacePolicy(base).resolve_read("ws/notes.txt") == base / "ws" / "notes.txt"


def test_absolute_read_outside_the_workspace_is_denied(base: Path) -> None:
    policy = WorkspacePolicy(base, "ws")
    with pytest.raises(PolicyDeniedError) as caught:
        policy.resolve_read(str(base / "outside" / "secret.txt"))
    error = caught.value
    assert error.message == (
        f"policy denied effect: read path `{base / 'outside' / 'secret.txt'}` resolves to "
        f"`{base / 'outside' / 'secret.txt'}`, outside the workspace root `{base / 'ws'}`"
    )
    assert error.code == "policy.path_outside_workspace"
    assert error.hint is not None and "spec.policy.workspaceRoot" in error.hint


@pytest.mark.parametrize("path", ["../outside/secret.txt", "a/../notes.txt", "..", "out/.."])
def test_parent_components_are_rejected_for_reads_and_writes(base: Path, path: str) -> None:
    policy = WorkspacePolicy(base, "ws", ["out"])
    for resolve, operation in ((policy.resolve_read, "read"), (policy.resolve_write, "write")):
        with pytest.raises(PolicyDeniedError) as caught:
            resolve(path)
        assert caught.value.message == (
            f"policy denied effect: {operation} path `{path}` contains a `..` component"
        )
        assert caught.value.code == "policy.path_parent_component"


def test_symlink_escaping_the_workspace_is_denied_for_reads(base: Path) -> None:
    (base / "ws" / "link.txt").symlink_to(base / "outside" / "secret.txt")
    (base / "ws" / "linkdir").symlink_to(base / "outside")
    policy = WorkspacePolicy(base, "ws")
    for path in ("link.txt", "linkdir/secret.txt", "linkdir/new.txt"):
        with pytest.raises(PolicyDeniedError) as caught:
            policy.resolve_read(path)
        assert "outside the workspace root" in caught.value.message


def test_symlink_staying_inside_the_workspace_is_followed(base: Path) -> None:
    (base / "ws" / "alias.txt").symlink_to(base / "ws" / "notes.txt")
    assert WorkspacePolicy(base, "ws").resolve_read("alias.txt") == base / "ws" / "notes.txt"


def test_symlinked_workspace_root_is_resolved(base: Path, tmp_path: Path) -> None:
    link = tmp_path / "ws-link"
    link.symlink_to(base / "ws")
    policy = WorkspacePolicy(tmp_path, "ws-link")
    assert policy.resolve_read("notes.txt") == base / "ws" / "notes.txt"


def test_writes_without_writable_roots_are_all_denied(base: Path) -> None:
    policy = WorkspacePolicy(base, "ws")
    with pytest.raises(PolicyDeniedError) as caught:
        policy.resolve_write("out/result.txt")
    assert caught.value.message == (
        "policy denied effect: write path `out/result.txt` is not writable: "
        "spec.policy.writableRoots is empty, so every write is denied"
    )
    assert caught.value.hint == "add a root containing the path to spec.policy.writableRoots"


def test_writes_inside_a_relative_writable_root_are_allowed(base: Path) -> None:
    policy = WorkspacePolicy(base, "ws", ["out"])
    assert policy.resolve_write("out/result.txt") == base / "ws" / "out" / "result.txt"
    assert policy.resolve_write("out/new/deep.txt") == base / "ws" / "out" / "new" / "deep.txt"


def test_writes_outside_every_writable_root_are_denied(base: Path) -> None:
    policy = WorkspacePolicy(base, "ws", ["out"])
    with pytest.raises(PolicyDeniedError) as caught:
        policy.resolve_write("notes.txt")
    assert caught.value.message == (
        f"policy denied effect: write path `notes.txt` resolves to `{base / 'ws' / 'notes.txt'}`,"
        f" outside every writable root (`{base / 'ws' / 'out'}`)"
    )
    assert caught.value.code == "policy.path_not_writable"
    assert caught.value.hint is not None and "spec.policy.writableRoots" in caught.value.hint


def test_absolute_writable_root_outside_the_workspace(base: Path) -> None:
    policy = WorkspacePolicy(base, "ws", [str(base / "outside")])
    target = base / "outside" / "report.txt"
    assert policy.resolve_write(str(target)) == target
    # The write root does not widen the read boundary.
    with pytest.raises(PolicyDeniedError):
        policy.resolve_read(str(target))


def test_symlink_escaping_a_writable_root_is_denied(base: Path) -> None:
    (base / "ws" / "out" / "escape").symlink_to(base / "outside")
    policy = WorkspacePolicy(base, "ws", ["out"])
    with pytest.raises(PolicyDeniedError) as caught:
        policy.resolve_write("out/escape/secret.txt")
    assert f"resolves to `{base / 'outside' / 'secret.txt'}`" in caught.value.message


def test_prefix_sibling_is_not_inside_the_root(base: Path) -> None:
    (base / "ws" / "out-sibling").mkdir()
    policy = WorkspacePolicy(base, "ws", ["out"])
    with pytest.raises(PolicyDeniedError):
        policy.resolve_write("out-sibling/x.txt")


def test_invalid_and_looping_paths_are_task_errors(base: Path) -> None:
    loop = base / "ws" / "loop"
    os.symlink(loop, loop)
    policy = WorkspacePolicy(base, "ws", ["."])
    for path, code in (("", "input.invalid"), ("a\0b", "input.invalid"), ("loop", None)):
        with pytest.raises(TaskError) as caught:
            policy.resolve_read(path)
        assert caught.value.code == (code or "file.unresolvable")
