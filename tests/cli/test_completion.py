"""Completion in a real bash: the script `agentctl completion bash` prints is sourced, the
shell's completion function is called as bash calls it, and COMPREPLY is checked."""

from __future__ import annotations

import shutil
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
  actions:
    ask: {kind: builtin.ask}
  tasks:
    - {id: env, uses: action:ask, with: {prompt: "Where?"}}
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@pytest.fixture
def shell(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``shell("resume", "")`` -> what bash offers for ``agentctl resume <TAB>``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "agentctl"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agentctl "$@"\n')
    launcher.chmod(0o755)
    script = cli("completion", "bash")
    assert script.exit_code == 0
    (tmp_path / "complete.bash").write_text(script.stdout)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in ("agentctl", *words))
        program = (
            f"source {tmp_path / 'complete.bash'}\n"
            f"COMP_WORDS=({line}); COMP_CWORD={len(words)}\n"
            "_agentctl_complete\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
        )
        done = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", program],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            cwd=tmp_path / "work",
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        return [line for line in done.stdout.splitlines() if line]

    return complete


@pytest.fixture
def paused(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    db = tmp_path / "runs.db"
    monkeypatch.setenv("AGENTCTL_DB", str(db))
    workflow = tmp_path / "work" / "ask.yaml"
    workflow.write_text(ASK)
    data = cli("--output", "json", "roll", workflow).json()["data"]
    return {"run": data["runId"], "approval": data["pendingApprovals"][0], "db": db}


def test_commands_and_subcommands(shell: Any) -> None:
    assert shell("r") == ["reconcile", "repair", "replay", "resume", "retry", "roll", "run", "runs"]
    assert shell("approvals", "") == ["answer", "approve", "list", "reject"]


def test_options_and_their_values(shell: Any) -> None:
    assert shell("runs", "list", "--st") == ["--state", "--status"]
    assert shell("runs", "list", "--state", "") == [
        "running",
        "paused",
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert shell("--output", "j") == ["json", "jsonl"]


def test_run_approval_ids_and_workflow_names_from_the_database(
    shell: Any, paused: dict[str, Any]
) -> None:
    assert shell("resume", "") == [paused["run"]]
    assert shell("inspect", "run-") == [paused["run"]]
    assert shell("approvals", "answer", "") == [paused["approval"]]
    assert shell("runs", "list", "--workflow", "") == ["asking"]


def test_database_named_on_the_line_is_used(
    shell: Any, paused: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTCTL_DB")
    assert shell("resume", "") == []
    assert shell("resume", "--db", str(paused["db"]), "") == [paused["run"]]


def test_workflow_files_complete_as_files(shell: Any, paused: dict[str, Any]) -> None:
    assert shell("roll", "as") == ["ask.yaml"]


def test_completion_never_creates_a_database(shell: Any, tmp_path: Path) -> None:
    assert shell("resume", "--db", str(tmp_path / "typo.db"), "") == []
    assert not (tmp_path / "typo.db").exists()
