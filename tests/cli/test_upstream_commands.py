"""Upstream's commands that agentctl added in the third round (docs/cli-reference.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def test_update_explains_and_never_updates(cli: Any) -> None:
    shown = cli("--output", "json", "update")
    assert shown.exit_code == 0, shown.stderr
    data = shown.json()["data"]
    assert shown.json()["kind"] == "UpdateInfo"
    assert data["automaticUpdate"] is False
    from agentctl.version import __version__

    assert data["currentVersion"] == __version__
    # This test runs from a source checkout (an editable install) or from an installed
    # package; either way the command is for this environment.
    assert (
        data["command"].endswith("install")
        and str(Path(__file__).resolve().parents[2]) in data["command"]
    ) or data["command"] == f"{sys.executable} -m pip install --upgrade agentctl"
    human = cli("update")
    assert "never updates itself" in human.stdout and data["command"] in human.stdout
