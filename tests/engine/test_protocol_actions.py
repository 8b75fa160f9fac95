"""mcp.call, a2a.delegate and extension.process inside real runs, against real peers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.protocol_servers.a2a_peer import A2APeer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol_servers"
TOKEN = "test-token-123"


def test_mcp_call_in_a_run(
    cli: Any, write_workflow: Any, tmp_path: Path, mcp_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TOKEN", f"Bearer {TOKEN}")
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: mcp}}
        spec:
          policy:
            approval: never
            networkAllowlist: [127.0.0.1]
            environmentAllowlist: [MCP_TOKEN]
          mcpServers:
            calc: {{url: "{mcp_url}", headers: {{Authorization: {{env: MCP_TOKEN}}}}}}
          actions:
            call: {{kind: mcp.call}}
          tasks:
            - id: add
              uses: action:call
              with: {{server: calc, tool: add, arguments: {{a: 2, b: 40}}}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    data = result.json()["data"]
    assert data["output"]["add"] == {"sum": 42}
    effects = cli("--output", "json", "effects", "list", data["runId"], "--db", db).json()["data"][
        "effects"
    ]
    assert [(e["operation"], e["effectClass"], e["idempotency"]) for e in effects] == [
        ("mcp.call", "network", "unknown")
    ]
    assert TOKEN not in json.dumps(effects)


def test_a2a_delegate_in_a_run(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    with A2APeer() as peer:
        path = write_workflow(f"""
            apiVersion: agentctl.dev/v1
            kind: Workflow
            metadata: {{name: a2a}}
            spec:
              policy: {{approval: never, networkAllowlist: [127.0.0.1]}}
              a2aPeers:
                helper: {{cardUrl: "{peer.card_url}", pollIntervalMs: 10, maxPolls: 5}}
              actions:
                delegate: {{kind: a2a.delegate}}
              tasks:
                - id: ask
                  uses: action:delegate
                  with: {{peer: helper, messageId: m-1, message: direct}}
        """)
        result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
        assert result.exit_code == 0, result.stderr
        assert result.json()["data"]["output"]["ask"]["parts"] == [{"text": "hi"}]
        assert peer.methods() == ["SendMessage"]


def test_a2a_peer_outside_the_allowlist_is_denied(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: a2a}
        spec:
          policy: {approval: never}
          a2aPeers:
            helper: {cardUrl: "http://127.0.0.1:9/.well-known/agent-card.json"}
          actions:
            delegate: {kind: a2a.delegate}
          tasks:
            - {id: ask, uses: "action:delegate", with: {peer: helper, messageId: m, message: x}}
    """)
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 4
    assert "networkAllowlist" in result.error_json()["error"]["message"]


@pytest.mark.parametrize("mode", ["ok", "key"])
def test_extension_process_in_a_run(
    cli: Any, write_workflow: Any, tmp_path: Path, mode: str
) -> None:
    python = Path(sys.executable).name
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: extension}}
        spec:
          policy: {{approval: never, processAllowlist: [{python}]}}
          actions:
            doubler:
              kind: extension.process
              command: "{sys.executable}"
              args: ["{FIXTURES / "extension.py"}", {mode}]
              idempotency: idempotent
              protocolVersion: agentctl.dev/process-extension/v1
              inputSchema:
                type: object
                properties: {{n: {{type: integer, maximum: 1000}}}}
                required: [n]
                additionalProperties: false
              outputSchema:
                type: object
                properties: {{doubled: {{type: integer}}}}
                required: [doubled]
              capabilities: [math]
          tasks:
            - {{id: double, uses: "action:doubler", with: {{n: 21}}}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    output = result.json()["data"]["output"]["double"]
    if mode == "ok":
        assert output == {"doubled": 42}
        return
    # The extension's environment carries the effect's idempotency key.
    effects = cli("--output", "json", "inspect", result.json()["data"]["runId"], "--db", db)
    (effect,) = effects.json()["data"]["effects"]
    assert output == {"doubled": 42, "key": effect["idempotencyKey"]}


def test_agent_is_offered_and_calls_an_mcp_tool(
    cli: Any,
    write_workflow: Any,
    tmp_path: Path,
    mcp_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_TOKEN", f"Bearer {TOKEN}")
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: mcp-agent}}
        spec:
          policy:
            approval: never
            networkAllowlist: [127.0.0.1]
            environmentAllowlist: [MCP_TOKEN]
          mcpServers:
            calc: {{url: "{mcp_url}", headers: {{Authorization: {{env: MCP_TOKEN}}}}}}
          providers: {{scripted: {{kind: fake}}}}
          agents:
            mathematician:
              provider: scripted
              model: scripted
              instructions: add the numbers with the tool
              tools: ["mcp:calc/add"]
              maxTurns: 2
              providerOptions: {{toolInput: {{a: 2, b: 40}}, finalText: done}}
          tasks:
            - {{id: sum, uses: "agent:mathematician", with: {{prompt: "2 + 40"}}}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    inspection = cli(
        "--output", "json", "inspect", result.json()["data"]["runId"], "--db", db
    ).json()["data"]
    operations = [e["operation"] for e in inspection["effects"]]
    assert operations == ["mcp.list_tools", "scripted", "tool.mcp:calc/add", "scripted"]
    (call,) = inspection["toolCalls"]
    assert call["tool"] == "mcp:calc/add" and call["status"] == "succeeded"
    tool_effect = next(e for e in inspection["effects"] if e["operation"].startswith("tool."))
    assert tool_effect["result"] == {"sum": 42}


def test_unknown_mcp_server_in_agent_tools_is_a_compile_error(
    cli: Any, write_workflow: Any
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: bad}
        spec:
          providers: {scripted: {kind: fake}}
          agents:
            a: {provider: scripted, model: m, instructions: x, tools: ["mcp:nowhere/add"]}
          tasks:
            - {id: t, uses: "agent:a"}
    """)
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2
    (diagnostic,) = result.error_json()["diagnostics"]
    assert diagnostic["code"] == "missing_reference"
    assert diagnostic["path"] == "spec.agents.a.tools[0]"


def test_mcp_call_to_a_stdio_server_in_a_run(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    python = Path(sys.executable).name
    log = tmp_path / "stdio-calls.log"
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: mcp-stdio}}
        spec:
          policy: {{approval: never, processAllowlist: [{python}]}}
          mcpServers:
            local:
              command: "{sys.executable}"
              args: ["{FIXTURES / "mcp_server.py"}", stdio, "{log}"]
          actions:
            call: {{kind: mcp.call, idempotency: pure}}
          tasks:
            - id: add
              uses: action:call
              with: {{server: local, tool: add, arguments: {{a: 1, b: 2}}}}
    """)
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"]["output"]["add"] == {"sum": 3}


def test_mcp_server_needs_exactly_one_transport(cli: Any, write_workflow: Any) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: bad}
        spec:
          mcpServers:
            both: {url: "http://127.0.0.1:1/mcp", command: python3}
          actions: {set: {kind: builtin.assign}}
          tasks: [{id: a, uses: "action:set"}]
    """)
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2
    assert result.error_json()["diagnostics"][0]["path"] == "spec.mcpServers.both"


def test_agent_calls_a_named_action_as_a_tool(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: action-tools}
        spec:
          policy: {approval: never, writableRoots: [out]}
          providers: {scripted: {kind: fake}}
          actions:
            save: {kind: builtin.write, description: Save a note into the workspace.}
            remember: {kind: builtin.memory.write}
          agents:
            scribe:
              provider: scripted
              model: scripted
              instructions: save the note
              tools: ["action:save"]
              maxTurns: 2
              providerOptions:
                toolInput: {path: out/note.txt, content: written by the model}
                finalText: saved
          tasks:
            - {id: write, uses: "agent:scribe", with: {prompt: "save it"}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert (workspace / "out" / "note.txt").read_text() == "written by the model"
    inspection = cli(
        "--output", "json", "inspect", result.json()["data"]["runId"], "--db", db
    ).json()["data"]
    assert [e["operation"] for e in inspection["effects"]] == [
        "scripted",
        "builtin.write",
        "scripted",
    ]
    assert [a["name"] for a in inspection["artifacts"]] == ["out/note.txt"]
    bad = path.read_text().replace('tools: ["action:save"]', 'tools: ["action:remember"]')
    path.write_text(bad)
    refused = cli("--output", "json", "check", path)
    assert refused.exit_code == 2
    assert refused.error_json()["diagnostics"][0]["code"] == "unsupported_capability"


def _helper_action(operation: str) -> str:
    """One ``spec.actions`` entry served by the shared devops helper (YAML flow mapping)."""
    from tests.fixtures.protocol_servers.devops_helper import OPERATIONS

    contract = OPERATIONS[operation]
    return (
        f'{{kind: extension.process, command: "{sys.executable}", '
        f'args: ["{FIXTURES / "devops_helper.py"}", {operation}], idempotency: idempotent, '
        f"protocolVersion: agentctl.dev/process-extension/v1, "
        f"inputSchema: {json.dumps(contract['inputSchema'])}, "
        f"outputSchema: {json.dumps(contract['outputSchema'])}, "
        f"capabilities: {json.dumps(contract['capabilities'])}}}"
    )


def test_one_helper_serves_several_actions_under_one_name(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    # The helper announces `devops-helper` for both actions; neither action is named that.
    python = Path(sys.executable).name
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: shared-helper}}
        spec:
          policy: {{approval: never, processAllowlist: [{python}]}}
          actions:
            inventory: {_helper_action("inventory")}
            write-report: {_helper_action("report")}
          tasks:
            - {{id: hosts, uses: "action:inventory", with: {{service: api}}}}
            - id: report
              uses: "action:write-report"
              needs: [hosts]
              with: {{title: hosts, lines: ["${{{{ tasks.hosts.output.service }}}}"]}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    data = result.json()["data"]
    assert data["output"]["hosts"]["hosts"][0] == "api-1.internal"
    assert data["output"]["report"] == {"path": "artifacts/hosts.md", "bytes": 4}
    events = cli("--output", "json", "audit", data["runId"], "--db", db).json()["data"]["events"]
    handshakes = [
        (event["taskId"], event["payload"]["action"], event["payload"]["announcedName"])
        for event in events
        if event["kind"] == "extension.handshake"
    ]
    assert handshakes == [
        ("hosts", "inventory", "devops-helper"),
        ("report", "write-report", "devops-helper"),
    ]
    assert all(e["effectId"] for e in events if e["kind"] == "extension.handshake")


def test_helper_contract_mismatch_still_fails_the_run(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    # The name is informational, the contract is not: a capability list that differs fails.
    python = Path(sys.executable).name
    action = _helper_action("inventory").replace('["inventory.read"]', '["inventory.write"]')
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: shared-helper-mismatch}}
        spec:
          policy: {{approval: never, processAllowlist: [{python}]}}
          actions:
            inventory: {action}
          tasks:
            - {{id: hosts, uses: "action:inventory", with: {{service: api}}}}
    """)
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 4
    message = result.error_json()["error"]["message"]
    assert "capabilities differ" in message and "devops-helper" in message
