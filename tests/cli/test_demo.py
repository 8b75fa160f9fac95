"""`make demo` stays true: the scripted journey pauses, is approved, resumes and verifies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_script_runs_the_whole_journey() -> None:
    env = {**os.environ, "AGENTCTL": str(Path(sys.executable).parent / "agentctl")}
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(exit 3: paused for approval)" in result.stdout
    assert "tests: all 42 tests passed" in result.stdout
    assert "chain verified" in result.stdout
