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


LEGACY = """\
# legacy
playbook: deploy
description: Old deploy
modules:
  say: { kind: builtin.assign }
policy: { approvalMode: never }
memory: { initial: { stage: start } }
agents:
  helper: { instructions: help, maxOutputTokens: 32 }
tasks:
  - id: one
    uses: module:say
    with: { value: 1 }
  - id: two
    uses: agent:helper
    needs: [one]
    with: { prompt: "v=${{ tasks.one.output.output.value }}" }
"""


def test_migrate_translates_a_legacy_playbook_that_then_runs(cli: Any, tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(LEGACY)
    checked = cli("--output", "json", "check", old)
    assert checked.error_json()["diagnostics"][0]["code"] == "migration_required"
    assert "agentctl migrate" in checked.error_json()["diagnostics"][0]["help"]
    shown = cli("--output", "json", "migrate", old)
    assert shown.exit_code == 0, shown.stderr
    data = shown.json()["data"]
    assert shown.json()["kind"] == "Migration"
    assert data["valid"] is True and data["written"] is None
    document = data["document"]
    assert document["metadata"] == {"name": "deploy", "description": "Old deploy"}
    assert document["spec"]["tasks"][0]["uses"] == "action:say"
    assert document["spec"]["policy"] == {"approval": "never"}
    assert document["spec"]["memory"] == {"working": {"stage": "start"}}
    assert document["spec"]["agents"]["helper"]["provider"] == "fake"
    assert "modules → spec.actions" in data["notes"]
    human = cli("migrate", old)
    assert human.stdout == data["yaml"] and "migrated: modules → spec.actions" in human.stderr
    new = tmp_path / "new.yaml"
    written = cli("migrate", old, "--write", new)
    assert written.exit_code == 0, written.stderr
    assert new.read_text() == data["yaml"]
    rolled = cli("--output", "json", "roll", new, "--db", tmp_path / "r.db")
    assert rolled.exit_code == 0, rolled.stderr
    assert rolled.json()["data"]["output"]["two"]["text"] == "fake: v=1"
    # Never overwrites; a file that is already v1 is refused.
    again = cli("--output", "json", "migrate", old, "--write", new)
    assert again.exit_code == 2 and "already exists" in again.error_json()["error"]["message"]
    refused = cli("--output", "json", "migrate", new)
    assert refused.exit_code == 2
    assert refused.error_json()["error"]["code"] == "migrate.not_legacy"


def test_doctor_checks_prerequisites_without_dispatching(
    cli: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    import socket

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    open_port = listening.getsockname()[1]
    workflow = tmp_path / "w.yaml"
    marker = tmp_path / "ran"
    workflow.write_text(f"""\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: needs}}
spec:
  policy: {{processAllowlist: [touch, sh], writableRoots: [out, locked/inner]}}
  providers:
    remote:
      kind: openai
      endpoint: "http://127.0.0.1:{closed_port}/v1"
      credential: {{env: DOCTOR_KEY}}
  agents: {{helper: {{provider: remote, model: m, instructions: hi}}}}
  mcpServers:
    up: {{url: "http://127.0.0.1:{open_port}/mcp"}}
    down: {{url: "http://127.0.0.1:{closed_port}/mcp"}}
  actions:
    mark: {{kind: builtin.shell.exec, command: touch, args: ["{marker}"]}}
    gone: {{kind: builtin.shell.exec, command: no-such-tool-xyz}}
    shout: {{kind: builtin.shell.exec, command: sh, args: ["-c", "true"]}}
  tasks:
    - {{id: m, uses: 'action:mark'}}
    - {{id: g, uses: 'action:gone'}}
    - {{id: a, uses: 'agent:helper', with: {{prompt: hi}}}}
""")
    monkeypatch.delenv("DOCTOR_KEY", raising=False)
    try:
        result = cli("--output", "json", "doctor", workflow)
    finally:
        listening.close()
    assert result.exit_code == 6, result.stderr
    assert result.json()["kind"] == "DoctorReport"
    checks = {(c["check"], c["target"].split(" ")[0]): c for c in result.json()["data"]["checks"]}
    assert checks[("command", "touch")]["status"] == "ok"
    gone = checks[("command", "no-such-tool-xyz")]
    assert gone["status"] == "missing" and "processAllowlist" in gone["fix"]
    assert checks[("credential", "providers")]["status"] == "missing"
    assert "DOCTOR_KEY" in checks[("credential", "providers")]["detail"]
    statuses = {
        c["target"].split(" at ")[0]: c["status"]
        for c in result.json()["data"]["checks"]
        if c["check"] == "endpoint"
    }
    assert statuses == {"MCP server `up`": "ok", "MCP server `down`": "unverified"}
    assert {
        c["status"] for c in result.json()["data"]["checks"] if c["check"] == "writable root"
    } == {"ok"}
    assert not marker.exists()  # nothing was dispatched
    human = cli("doctor", workflow)
    assert human.exit_code == 6 and "fix: add `no-such-tool-xyz`" in human.stdout
