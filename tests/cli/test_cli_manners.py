"""The command line behaves as people expect: bare commands show help, --version works,
bad values are refused naming the valid ones, a closed pipe ends quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ASK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  inputs: {region: eu, size: 1}
  actions:
    ask: {kind: builtin.ask}
  tasks:
    - {id: env, uses: action:ask, with: {prompt: "Where?"}}
"""


def test_bare_agentctl_and_bare_groups_show_help(cli: Any) -> None:
    for args in ([], ["runs"], ["approvals"]):
        result = cli(*args)
        assert result.exit_code == 0, result.stderr
        assert "Usage: agentctl" in result.stdout
        assert "error" not in result.stderr


def test_version_option(cli: Any) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("agentctl ")
    assert cli("--output", "json", "--version").json()["kind"] == "Version"


def test_unknown_state_is_refused_naming_the_states(cli: Any, tmp_path: Path) -> None:
    result = cli("--output", "json", "runs", "list", "--state", "bogus", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    message = result.error_json()["error"]["message"]
    assert "'bogus'" in message
    assert "running, paused, succeeded, failed, cancelled" in message
    assert not (tmp_path / "r.db").exists()


def test_undeclared_input_is_refused_naming_the_declared_ones(cli: Any, tmp_path: Path) -> None:
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(ASK)
    db = tmp_path / "r.db"
    for option in (["--input", "nope=1"], ["--inputs", '{"region": "us", "nope": 1}']):
        result = cli("--output", "json", "roll", workflow, *option, "--db", db)
        assert result.exit_code == 2, result.stderr
        error = result.error_json()["error"]
        assert error["code"] == "input.undeclared"
        assert "'nope'" in error["message"] and "declared: region, size" in error["message"]
    assert not db.exists()
    declared = cli("--output", "json", "roll", workflow, "--input", "region=us", "--db", db)
    assert declared.exit_code == 3, declared.stderr


@pytest.mark.parametrize("args", [["--output", "json", "runs", "list", "--help"], ["--help"]])
def test_a_closed_pipe_ends_quietly(tmp_path: Path, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before agentctl writes a byte
    try:
        result = subprocess.run(
            [sys.executable, "-m", "agentctl", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
            cwd=tmp_path,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""  # no traceback, no "internal error"
    # 141 (128 + SIGPIPE) from agentctl; the help renderer ends a broken pipe with 1.
    assert result.returncode in (141, 1)
