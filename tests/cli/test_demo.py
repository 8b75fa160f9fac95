"""`make demo` stays true: the scripted journey pauses, is approved, resumes and verifies.

The script's nine ``agentctl`` calls are commands forked from the tests' fork server
(tests/forkserver.py: each its own process, with the script's streams, directory,
environment and exit codes), so the script is what is tested here, not nine interpreter
start-ups. The same script through an installed console script is the wheel test's
(tests/packaging/test_wheel_extras.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.forkserver import agentctl_command

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_script_runs_the_whole_journey(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTCTL": str(agentctl_command(tmp_path))}
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
