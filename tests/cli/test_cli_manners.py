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


def _command_paths_with(option: str) -> list[tuple[str, ...]]:
    """Every command (as its words after `agentctl`) that declares ``option``."""
    from typer.main import get_command

    from agentctl.cli.app import app

    found: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):  # a group
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        elif any(option in getattr(p, "opts", ()) for p in command.params):
            found.append(path)

    walk(get_command(app), ())
    return sorted(found)


# How each command that takes --input is called; the test below fails when a new one
# appears without a line here, so its validation cannot be forgotten.
INPUT_COMMANDS: dict[tuple[str, ...], list[str]] = {
    ("monitor", "add"): ["monitor", "add", "watcher", "WF", "--command", "true", "--db", "DB"],
    ("plan",): ["plan", "WF"],
    ("roll",): ["roll", "WF", "--db", "DB"],
    ("run",): ["run", "WF", "--db", "DB"],
    ("schedule", "add"): ["schedule", "add", "nightly", "WF", "--every", "1h", "--db", "DB"],
}


def test_the_input_commands_are_all_listed() -> None:
    assert _command_paths_with("--input") == sorted(INPUT_COMMANDS)


@pytest.mark.parametrize("path", sorted(INPUT_COMMANDS), ids=" ".join)
def test_every_input_command_refuses_an_undeclared_input(
    cli: Any, tmp_path: Path, path: tuple[str, ...]
) -> None:
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(ASK)
    db = tmp_path / "r.db"
    args = [{"WF": str(workflow), "DB": str(db)}.get(a, a) for a in INPUT_COMMANDS[path]]
    result = cli("--output", "json", *args, "--input", "region=us", "--input", "nope=1")
    assert result.exit_code == 2, result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "input.undeclared"
    assert error["message"] == (
        "input 'nope' is not declared in the workflow's spec.inputs (declared: region, size)"
    )
    assert not db.exists()
    human = cli(*args, "--input", "nope=1")
    assert human.exit_code == 2
    assert human.stderr.splitlines()[0].startswith("error: input 'nope' is not declared")


def test_plan_lists_declared_input_overrides(cli: Any, tmp_path: Path) -> None:
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(ASK)
    planned = cli("--output", "json", "plan", workflow, "--input", "size=3")
    assert planned.exit_code == 0, planned.stderr
    assert planned.json()["data"]["inputOverrides"] == {"size": 3}


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
