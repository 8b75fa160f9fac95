"""Agent CLIs (`kind: command` providers) with `isolation: sandbox`: the program runs in a
real bubblewrap sandbox, sees only the workspace (read-only) and its writable roots, and a
breached limit is the provider call's error (docs/isolation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentctl.providers.base import ProviderCallError
from agentctl.providers.command import CommandProvider
from agentctl.providers.registry import build_provider
from agentctl.sandbox import SandboxView
from tests.engine.sandboxes import SYSTEM_PYTHON, require_bwrap
from tests.fixtures.llm_servers.model_requests import call, model_request

pytestmark = pytest.mark.usefixtures("bwrap")


@pytest.fixture
def bwrap() -> None:
    require_bwrap()


def _provider(
    view: SandboxView, script: str, sandbox: dict[str, Any] | None = None
) -> CommandProvider:
    provider = build_provider(
        "cli",
        {
            "kind": "command",
            "command": SYSTEM_PYTHON,
            "args": ["-c", script],
            "isolation": "sandbox",
            "sandbox": sandbox,
        },
        environ={"PATH": "/usr/bin:/bin"},
        process_allowlist=["python3"],
        cwd=view.read_root,
        sandbox_view=view,
    )
    assert isinstance(provider, CommandProvider)
    return provider


SNOOP = """
import os, sys
prompt = sys.stdin.read()
seen = []
for path in ("/root", ".agentctl/runtime.db", "notes.txt"):
    try:
        with open(path, "rb") as handle:
            seen.append(f"{path}:{len(handle.read())}")
    except OSError as exc:
        seen.append(f"{path}:{type(exc).__name__}")
for target in ("notes.txt", "out/reply.txt"):
    try:
        with open(target, "w") as handle:
            handle.write(prompt)
        seen.append(f"wrote {target}")
    except OSError as exc:
        seen.append(f"{target}:{type(exc).__name__}")
print(" ".join(seen))
"""


def test_a_sandboxed_agent_cli_sees_only_its_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".agentctl").mkdir(parents=True)
    database = workspace / ".agentctl" / "runtime.db"
    database.write_bytes(b"SQLite format 3\0" + b"x" * 100)
    (workspace / "notes.txt").write_text("notes")
    view = SandboxView(workspace, (workspace / "out",), str(database))
    response = call(_provider(view, SNOOP), model_request("cli", instructions="hi"))
    assert response.text.split() == [
        "/root:FileNotFoundError",
        ".agentctl/runtime.db:FileNotFoundError",
        "notes.txt:5",
        "notes.txt:OSError",  # read-only file system
        "wrote",
        "out/reply.txt",
    ]
    assert (workspace / "notes.txt").read_text() == "notes"
    assert (workspace / "out" / "reply.txt").read_text() == "hi\n\nhello"


def test_a_breached_limit_is_uncertain_with_its_code(tmp_path: Path) -> None:
    view = SandboxView(tmp_path)
    provider = _provider(view, "hog = b'x' * (512 << 20)", {"limits": {"memoryBytes": 64 << 20}})
    with pytest.raises(ProviderCallError) as caught:
        call(provider, model_request("cli"))
    assert (caught.value.code, caught.value.applied) == ("sandbox.memory_limit", "uncertain")


def test_no_bubblewrap_did_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    provider = _provider(SandboxView(tmp_path), "open('ran', 'w')")
    with pytest.raises(ProviderCallError) as caught:
        call(provider, model_request("cli"))
    error = caught.value
    assert (error.code, error.applied, error.retryable) == (
        "isolation.unavailable",
        "not_applied",
        False,
    )
    assert not (tmp_path / "ran").exists()


WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: boxed-agent}}
spec:
  policy:
    approval: never
    processAllowlist: [python3]
    writableRoots: [out]
    minimumIsolation: sandbox
  providers:
    cli:
      kind: command
      command: {python}
      args: ["-c", "import sys, os; print('reply:', sys.stdin.read(), os.path.exists('/root'))"]
      isolation: sandbox
      sandbox: {{limits: {{processes: 32}}}}
  agents:
    writer: {{provider: cli, model: any, instructions: say hi}}
  tasks:
    - {{id: write, uses: "agent:writer", with: {{prompt: now}}}}
"""


def test_a_run_with_a_sandboxed_agent_cli(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    path = write_workflow(WORKFLOW.format(python=SYSTEM_PYTHON))
    planned = cli("plan", path)
    assert planned.exit_code == 0, planned.stderr
    assert "isolation sandbox: no network, processes 32" in planned.stdout
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "False" in str(result.json()["data"]["output"])


def test_an_agent_after_a_process_action_is_checked_too(
    cli: Any, write_workflow: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: the run-creation check reused one name for the workflow's spec and an
    # action's container settings, so an agent task after a process action crashed it.
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap: the sandboxed agent CLI refuses
    text = WORKFLOW.format(python=SYSTEM_PYTHON).replace(
        "  agents:",
        "  actions:\n    first: {kind: builtin.shell.exec, command: python3, isolation: sandbox}\n"
        "  agents:",
    )
    text = text.replace(
        "  tasks:\n    - {id: write,",
        '  tasks:\n    - {id: first, uses: "action:first"}\n    - {id: write,',
    )
    path = write_workflow(text)
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 3, result.stdout + result.stderr
    assert result.error_json()["error"]["code"] == "isolation.unavailable"
