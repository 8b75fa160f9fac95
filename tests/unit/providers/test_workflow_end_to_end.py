"""An agent workflow run from the CLI against each loopback protocol server.

The executor builds providers from the workflow's entries; these runs prove the whole path
(compile, effect journal, provider, tool turn, output) and that provider failures land in
the right run and effect states: a 429 fails the task, a hang leaves the effect uncertain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_servers.anthropic_wire import message_agent
from tests.fixtures.llm_servers.openai_wire import chat_agent, responses_agent
from tests.fixtures.llm_servers.server import Hang, JsonReply, LoopbackServer

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: loopback-agent
spec:
  policy: {{networkAllowlist: [127.0.0.1]}}
  providers:
    model:
      kind: {kind}
      endpoint: {endpoint}
  tools:
    shout:
      kind: builtin.echo
      description: Echo the input back.
      inputSchema:
        type: object
        properties: {{text: {{type: string}}}}
        required: [text]
        additionalProperties: false
      outputSchema: {{type: object}}
      capability: internal
      risk: low
      effectClass: pure
      idempotency: pure
      retrySafe: true
      timeoutSeconds: 5
  agents:
    helper:
      provider: model
      model: test-model
      instructions: Use the tool, then answer.
      tools: [shout]
      maxTurns: 3
      timeoutSeconds: 1
  tasks:
    - id: ask
      uses: agent:helper
      with: {{prompt: say hi}}
"""

FORMATS = [
    ("openai", "/v1/responses", responses_agent),
    ("openai", "/v1/chat/completions", chat_agent),
    ("anthropic", "/v1/messages", message_agent),
]


def _workflow(tmp_path: Path, kind: str, endpoint: str) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW.format(kind=kind, endpoint=endpoint))
    return path


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-e2e")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-e2e")


@pytest.mark.parametrize(("kind", "path", "agent"), FORMATS, ids=["responses", "chat", "messages"])
def test_agent_with_a_tool_turn_succeeds(
    cli: Any, tmp_path: Path, kind: str, path: str, agent: Any
) -> None:
    with LoopbackServer() as server:
        script = agent("shout", {"text": "hi"}, "Done:")
        server.script(script, script)
        result = cli("--output", "json", "roll", _workflow(tmp_path, kind, server.url(path)))
    assert result.exit_code == 0, result.stderr
    output = result.json()["data"]["output"]["ask"]
    assert output["text"] == 'Done: {"text":"hi"}'
    assert output["usage"]["inputTokens"] > 0
    assert len(server.requests) == 2


def test_rate_limited_provider_fails_the_run(cli: Any, tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.script(JsonReply({"error": {"message": "slow down"}}, status=429))
        workflow = _workflow(tmp_path, "openai", server.url("/v1/chat/completions"))
        result = cli("--output", "json", "roll", workflow)
    assert result.exit_code == 4
    error = result.error_json()["error"]
    assert error["code"] == "provider.rate_limited"
    assert "HTTP 429: slow down" in error["message"]


def test_hanging_provider_leaves_the_model_effect_uncertain(cli: Any, tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.script(Hang())
        workflow = _workflow(tmp_path, "anthropic", server.url("/v1/messages"))
        result = cli("--output", "json", "roll", workflow)
    assert result.exit_code == 3
    data = result.json()["data"]
    assert data["error"]["code"] == "effect.uncertain"
    assert [effect["operation"] for effect in data["uncertainEffects"]] == ["model"]


def test_missing_credential_fails_before_any_request(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with LoopbackServer() as server:
        workflow = _workflow(tmp_path, "anthropic", server.url("/v1/messages"))
        # Loopback endpoints may go without a key unless one is declared, as here.
        text = workflow.read_text().replace(
            "      endpoint:", "      credential: {env: ANTHROPIC_API_KEY}\n      endpoint:"
        )
        workflow.write_text(text)
        result = cli("--output", "json", "roll", workflow)
    assert server.requests == []
    # Credentials are checked before the run record is created: exit 6, no run.
    assert result.exit_code == 6
    error = result.error_json()["error"]
    assert "runId" not in error
    assert error["code"] == "provider.credential_missing"
    assert "`ANTHROPIC_API_KEY` is not set or empty" in error["message"]


def test_endpoint_outside_the_network_allowlist_is_refused_before_the_run(
    cli: Any, tmp_path: Path
) -> None:
    with LoopbackServer() as server:
        workflow = _workflow(tmp_path, "openai", server.url("/v1/responses"))
        workflow.write_text(
            workflow.read_text().replace(
                "networkAllowlist: [127.0.0.1]", "networkAllowlist: ['*.example.com']"
            )
        )
        result = cli("--output", "json", "roll", workflow, "--db", tmp_path / "r.db")
    assert server.requests == []
    assert result.exit_code == 3
    error = result.error_json()["error"]
    assert error["code"] == "policy.network_denied" and "127.0.0.1" in error["message"]
    assert "networkAllowlist" in error["hint"]
