"""Where a process step's executable is found: a name is looked up on ``PATH`` once per
process and ``PATH``, as a shell hashes the commands it ran, and looked up again once the
file it named is no longer an executable file (docs/actions.md, "Finding the executable")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentctl import executables
from agentctl.errors import PolicyDeniedError, TaskError
from agentctl.executables import resolve_executable


def _tool(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho tool\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names looked up on a search path (``shutil.which``) from here on."""
    looked: list[str] = []
    which = shutil.which

    def counted(name: str, *args: Any, **kwargs: Any) -> str | None:
        looked.append(name)
        return which(name, *args, **kwargs)

    monkeypatch.setattr(executables, "_FOUND", {})
    monkeypatch.setattr(executables.shutil, "which", counted)
    return looked


def test_a_name_is_looked_up_on_path_once_while_its_file_stays_executable(
    tmp_path: Path, lookups: list[str]
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    tool = _tool(second / "tool")
    first.mkdir()
    path = f"{first}{os.pathsep}{second}"
    for _ in range(5):
        assert resolve_executable("tool", ["tool"], path) == str(tool)
    assert lookups == ["tool"]
    # Another PATH is another lookup.
    assert resolve_executable("tool", ["tool"], str(second)) == str(tool)
    assert lookups == ["tool", "tool"]
    # The file found is gone: the name is looked up again, and found where it now is.
    tool.unlink()
    moved = _tool(first / "tool")
    assert resolve_executable("tool", ["tool"], path) == str(moved)
    assert lookups == ["tool", "tool", "tool"]
    # No longer executable: looked up again, and not found.
    moved.chmod(0o644)
    with pytest.raises(TaskError) as caught:
        resolve_executable("tool", ["tool"], path)
    assert caught.value.code == "process.not_found"


def test_the_allow_list_is_checked_on_every_resolution_of_a_known_name(
    tmp_path: Path, lookups: list[str]
) -> None:
    _tool(tmp_path / "tool")
    resolve_executable("tool", ["tool"], str(tmp_path))
    with pytest.raises(PolicyDeniedError):
        resolve_executable("tool", ["other"], str(tmp_path))
    assert lookups == ["tool"]


def test_a_name_found_through_a_relative_path_entry_is_looked_up_each_time(
    tmp_path: Path, lookups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``bin/tool`` points depends on the working directory: never remembered."""
    tool = _tool(tmp_path / "bin" / "tool")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert resolve_executable("tool", ["tool"], "bin") == str(tool)
    assert lookups == ["tool", "tool"]
