"""What `check` accepts, `roll` does: secret references and streaming, through the CLI.

`check` and `roll` share one secret resolver and one capability table; these tests pin the
contract from the outside, against real loopback peers (an OpenAI-style server, the MCP
fixture server, an A2A peer) and real child processes.
"""

from __future__ import annotations

import stat
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentctl.spec.capabilities import CHAT_CAPABILITIES, PROVIDER_CAPABILITIES
from tests.engine.conftest import TOKEN
from tests.fixtures.llm_servers.anthropic_wire import message_body, message_stream
from tests.fixtures.llm_servers.openai_wire import chat_stream, responses_body, responses_stream
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer, SseReply
from tests.fixtures.protocol_servers.a2a_peer import A2APeer

SECRETS = {
    "PROVIDER_KEY": "sk-contract",
    "TEAM": "team-blue",
    "ACTION_SECRET": "action-secret-value",
    "MCP_TOKEN": f"Bearer {TOKEN}",
    "A2A_KEY": "a2a-key-value",
}


def _process_script(directory: Path) -> Path:
    """An executable that prints the secret named by its argument (run with no environment)."""
    script = directory / "print-secret"
    cases = "".join(f"  {name}) printf '%s\\n' '{value}' ;;\n" for name, value in SECRETS.items())
    script.write_text(f'#!/bin/sh\ncase "$1" in\n{cases}  *) exit 3 ;;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _reference(shape: str, name: str, script: Path) -> str:
    if shape == "env":
        return f"{{env: {name}}}"
    if shape == "file":
        return f"{{file: {name}.txt}}"
    return f'{{process: {{command: "{script}", args: [{name}]}}}}'


@pytest.mark.parametrize("shape", ["env", "file", "process"])
def test_every_secret_form_check_accepts_resolves_at_run_time(
    cli: Any,
    tmp_path: Path,
    workspace: Path,
    mcp_url: str,
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    (workspace / "secrets").mkdir()
    for name, value in SECRETS.items():
        (workspace / "secrets" / f"{name}.txt").write_text(value + "\n")
    script = _process_script(tmp_path)

    def ref(name: str) -> str:
        return _reference(shape, name, script)

    with LoopbackServer() as server, A2APeer() as peer:
        server.script(JsonReply(responses_body(text="answered", response_id="r1")))
        path = workspace / "wf.yaml"
        path.write_text(
            textwrap.dedent(f"""\
            apiVersion: agentctl.dev/v1
            kind: Workflow
            metadata: {{name: secret-forms}}
            spec:
              policy:
                approval: never
                processAllowlist: [sh]
                networkAllowlist: [127.0.0.1]
                environmentAllowlist: [{", ".join(SECRETS)}]
                secretFileRoots: [secrets]
                secretProcessAllowlist: [print-secret]
              providers:
                remote:
                  kind: openai
                  endpoint: "{server.url("/v1/responses")}"
                  credential: {ref("PROVIDER_KEY")}
                  headers: {{X-Team: {ref("TEAM")}}}
              agents:
                helper: {{provider: remote, model: small, instructions: answer}}
              mcpServers:
                calc: {{url: "{mcp_url}", headers: {{Authorization: {ref("MCP_TOKEN")}}}}}
              a2aPeers:
                buddy:
                  cardUrl: "{peer.card_url}"
                  headers: {{X-Api-Key: {ref("A2A_KEY")}}}
                  pollIntervalMs: 10
              actions:
                verify:
                  kind: builtin.shell.exec
                  command: sh
                  args: ["-c", 'test "$ACTION_SECRET" = "{SECRETS["ACTION_SECRET"]}"']
                  env: {{ACTION_SECRET: {ref("ACTION_SECRET")}}}
                call: {{kind: mcp.call}}
                delegate: {{kind: a2a.delegate}}
              tasks:
                - {{id: ask, uses: "agent:helper", with: {{prompt: hello}}}}
                - {{id: env, uses: "action:verify"}}
                - {{id: add, uses: "action:call", with: {{server: calc, tool: add,
                    arguments: {{a: 2, b: 40}}}}}}
                - {{id: hand, uses: "action:delegate", with: {{peer: buddy, messageId: m-1,
                    message: direct}}}}
            """)
        )
        checked = cli("--output", "json", "check", path)
        assert checked.exit_code == 0, checked.stderr
        rolled = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
        assert rolled.exit_code == 0, rolled.stderr
        request = server.requests[0]
        assert request.headers["authorization"] == f"Bearer {SECRETS['PROVIDER_KEY']}"
        assert request.headers["x-team"] == SECRETS["TEAM"]
        assert any(h.get("x-api-key") == SECRETS["A2A_KEY"] for h in peer.headers)
    output = rolled.json()["data"]["output"]
    assert output["ask"]["text"] == "answered"
    assert output["env"]["exitCode"] == 0
    assert output["add"] == {"sum": 42}  # the MCP server refuses a wrong bearer token


def test_secret_forms_the_run_cannot_resolve_are_refused_by_check(
    cli: Any, write_workflow: Any
) -> None:
    path = write_workflow("""\
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: unresolvable}
        spec:
          policy: {processAllowlist: [sh], environmentAllowlist: [T]}
          mcpServers:
            calc:
              url: "http://127.0.0.1:9/mcp"
              headers: {Authorization: {file: token.txt}}
          actions:
            run:
              kind: builtin.shell.exec
              command: sh
              env: {T: {process: {command: /usr/bin/pass, args: [show]}}}
          tasks:
            - {id: a, uses: "action:run"}
    """)
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2
    found = [
        (d["code"], d["path"], d["line"], d["help"]) for d in result.error_json()["diagnostics"]
    ]
    assert found == [
        (
            "invalid_secret_reference",
            "spec.actions.run.env.T.process.command",
            14,
            "add `pass` to spec.policy.secretProcessAllowlist",
        ),
        (
            "invalid_secret_reference",
            "spec.mcpServers.calc.headers.Authorization.file",
            9,
            "add the directory holding the file to spec.policy.secretFileRoots",
        ),
    ]


def _responses(server: LoopbackServer) -> tuple[str, SseReply]:
    return server.url("/v1/responses"), responses_stream(responses_body(text="streamed answer"))


def _azure(server: LoopbackServer) -> tuple[str, SseReply]:
    return server.url("/openai/v1/responses"), responses_stream(
        responses_body(text="streamed answer")
    )


def _chat(server: LoopbackServer) -> tuple[str, SseReply]:
    return server.url("/v1/chat/completions"), chat_stream(text="streamed answer")


def _messages(server: LoopbackServer) -> tuple[str, SseReply]:
    return server.url("/v1/messages"), message_stream(message_body(text="streamed answer"))


STREAMING_SERVERS: dict[str, Callable[[LoopbackServer], tuple[str, SseReply]]] = {
    "openai": _responses,
    "openai-chat": _chat,
    "azure_openai": _azure,
    "anthropic": _messages,
}
"""How to serve a stream for each provider kind (and mode) that claims ``streaming``."""

STREAMING_KINDS = sorted(
    [kind for kind, caps in PROVIDER_CAPABILITIES.items() if "streaming" in caps]
    + (["openai-chat"] if "streaming" in CHAT_CAPABILITIES else [])
)


def test_every_streaming_kind_has_a_loopback_stream() -> None:
    # A kind that starts claiming streaming must be added to the run below.
    assert set(STREAMING_KINDS) - {"fake"} == set(STREAMING_SERVERS)


@pytest.mark.parametrize("kind", STREAMING_KINDS)
def test_stream_true_agent_runs_for_every_kind_that_claims_streaming(
    cli: Any, tmp_path: Path, write_workflow: Any, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    for variable in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    template = """\
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: streaming}}
        spec:
          policy: {{networkAllowlist: [127.0.0.1]}}
          providers:
            model: {provider}
          agents:
            talker:
              provider: model
              model: test-model
              instructions: answer
              stream: true
              {options}
          tasks:
            - {{id: ask, uses: "agent:talker", with: {{prompt: hi}}}}
    """
    if kind == "fake":
        path = write_workflow(
            template.format(
                provider="{kind: fake}", options="providerOptions: {finalText: streamed answer}"
            )
        )
        checked = cli("--output", "json", "check", path)
        assert checked.exit_code == 0, checked.stderr
        rolled = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
        assert rolled.exit_code == 0, rolled.stderr
        assert rolled.json()["data"]["output"]["ask"]["text"] == "streamed answer"
        return
    with LoopbackServer() as server:
        endpoint, reply = STREAMING_SERVERS[kind](server)
        server.script(reply)
        real_kind = "openai" if kind == "openai-chat" else kind
        path = write_workflow(
            template.format(provider=f'{{kind: {real_kind}, endpoint: "{endpoint}"}}', options="")
        )
        checked = cli("--output", "json", "check", path)
        assert checked.exit_code == 0, checked.stderr
        rolled = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
        assert rolled.exit_code == 0, rolled.stderr
        assert server.requests[0].json["stream"] is True
    assert rolled.json()["data"]["output"]["ask"]["text"] == "streamed answer"
