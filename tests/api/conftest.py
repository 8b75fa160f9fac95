"""Fixtures for the Python API tests: a workspace to write workflows into."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def write_workflow(workspace: Path) -> Any:
    def write(text: str, name: str = "wf.yaml") -> Path:
        path = workspace / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
