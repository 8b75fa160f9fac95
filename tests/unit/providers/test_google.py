"""The Gemini generateContent provider over a loopback server speaking that format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentctl.errors import ProviderError
from agentctl.providers.base import Message, ModelResponse, ProviderCallError, ToolCall, Usage
from agentctl.providers.google import (
    DEFAULT_MODELS_URL,
    GOOGLE_CAPABILITIES,
    GoogleProvider,
    build_google,
)
from agentctl.providers.registry import build_provider, describe_provider
from tests.fixtures.llm_servers.google_wire import generate_agent, generate_body
from tests.fixtures.llm_servers.model_requests import WEATHER, call, model_request
from tests.fixtures.llm_servers.server import Hang, JsonReply, LoopbackServer, RawReply, Recorded

ENV = {"GEMINI_API_KEY": "gk-test-1"}
PATH = "/v1beta/models/test-model:generateContent"


def _provider(server: LoopbackServer, base: str = "/v1beta") -> GoogleProvider:
    return build_google("gem", {"kind": "google", "endpoint": server.url(base)}, environ=ENV)


def _one(reply: Any, **request: Any) -> tuple[ModelResponse, Recorded]:
    with LoopbackServer() as server:
        server.script(reply)
        response = call(_provider(server), model_request(**request))
    return response, server.requests[0]


def _failure(reply: Any, **request: Any) -> ProviderCallError:
    with LoopbackServer() as server:
        server.script(reply)
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request(**request))
    return caught.value


def test_plain_answer_path_headers_and_body() -> None:
    response, sent = _one(JsonReply(generate_body(text="Bonjour")))
    assert sent.path == PATH
    assert sent.headers["x-goog-api-key"] == "gk-test-1"
    assert "authorization" not in sent.headers
    assert sent.json == {
        "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "generationConfig": {"maxOutputTokens": 256},
    }
    assert response.text == "Bonjour"
    assert response.finish_reason == "complete"
    assert response.tool_calls == ()
    assert response.response_id == "resp-1"
    assert response.raw["model"] == "gemini-test"
    assert response.provider_items == ()


def test_models_url_endpoint_and_prefixed_model_id() -> None:
    with LoopbackServer() as server:
        server.script(JsonReply(generate_body(text="ok")))
        provider = _provider(server, "/v1beta/models/")
        call(provider, model_request(model="models/gemini-2.5-flash"))
    assert server.requests[0].path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert provider.endpoint.describe()["endpoint"] == server.url("/v1beta/models/")


def test_default_endpoint_and_registry_build() -> None:
    provider = build_provider("g", {"kind": "google"}, environ=ENV)
    assert isinstance(provider, GoogleProvider)
    assert provider.capabilities == GOOGLE_CAPABILITIES
    info = describe_provider("g", {"kind": "google"}, environ=ENV)
    assert info["endpoint"] == DEFAULT_MODELS_URL
    assert info["api"] == "generateContent"
    assert info["credential"]["source"] == "env:GEMINI_API_KEY"
    assert "gk-test-1" not in repr(info)
    assert info["capabilities"] == [
        "cancellation",
        "continuation",
        "function_tools",
        "reasoning_effort",
        "structured_output",
        "text",
        "usage",
    ]


def test_missing_credential_fails_at_build() -> None:
    with pytest.raises(ProviderError) as caught:
        build_provider("g", {"kind": "google"}, environ={})
    assert caught.value.code == "provider.credential_missing"
    assert "`GEMINI_API_KEY` is not set or empty" in caught.value.message
    assert caught.value.exit_code == 6


def test_tool_call_round_trip_synthesizes_ids_and_maps_results_by_name() -> None:
    with LoopbackServer() as server:
        agent = generate_agent("get_weather", {"city": "Oslo"}, "It is")
        server.script(agent, agent)
        provider = _provider(server)
        first = call(provider, model_request(tools=(WEATHER,)))
        assert first.finish_reason == "tool_calls"
        assert first.tool_calls == (ToolCall("call-0-0", "get_weather", {"city": "Oslo"}),)
        messages = (
            Message("user", "hello"),
            Message(
                "assistant",
                "Let me check.",
                (*first.tool_calls, ToolCall("call-0-1", "lookup", {"q": "Rome"})),
            ),
            Message("tool", tool_call_id="call-0-0", tool_result={"temp": 3}),
            Message("tool", tool_call_id="call-0-1", tool_result="warm"),
        )
        second = call(provider, model_request(tools=(WEATHER,), messages=messages))
    assert second.text == "It is warm"
    assert second.finish_reason == "complete"
    body = server.requests[1].json
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Look up the weather",
                    "parameters": dict(WEATHER.input_schema),
                }
            ]
        }
    ]
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"text": "Let me check."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
                {"functionCall": {"name": "lookup", "args": {"q": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": {"temp": 3}}}},
                {"functionResponse": {"name": "lookup", "response": {"output": "warm"}}},
            ],
        },
    ]


def test_call_ids_number_the_model_turn() -> None:
    messages = (
        Message("user", "hello"),
        Message("assistant", None, (ToolCall("call-0-0", "get_weather", {}),)),
        Message("tool", tool_call_id="call-0-0", tool_result=1),
    )
    body = generate_body(calls=[("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})])
    response, _ = _one(JsonReply(body), messages=messages, tools=(WEATHER,))
    assert [c.id for c in response.tool_calls] == ["call-1-0", "call-1-1"]


def test_tool_result_without_its_call_is_refused_before_sending() -> None:
    messages = (Message("user", "hi"), Message("tool", tool_call_id="nope", tool_result=1))
    with LoopbackServer() as server:
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request(messages=messages))
    assert server.requests == []
    assert (caught.value.code, caught.value.applied) == ("provider.invalid_request", "not_applied")
    assert "'nope'" in caught.value.message


def test_thought_signatures_are_kept_and_sent_back_verbatim() -> None:
    body = generate_body(calls=[("get_weather", {"city": "Oslo"})], signature="c2ln")
    first, _ = _one(JsonReply(body), tools=(WEATHER,))
    raw_part = {
        "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
        "thoughtSignature": "c2ln",
    }
    assert first.provider_items == (raw_part,)
    messages = (
        Message("user", "hello"),
        Message("assistant", None, first.tool_calls, provider_items=first.provider_items),
        Message("tool", tool_call_id="call-0-0", tool_result="cold"),
    )
    _, sent = _one(JsonReply(generate_body(text="ok")), messages=messages, tools=(WEATHER,))
    assert sent.json["contents"][1] == {"role": "model", "parts": [raw_part]}


def test_structured_output_and_reasoning_config() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    response, sent = _one(
        JsonReply(generate_body(text='{"ok": true}')),
        structured_output=schema,
        reasoning={"effort": "high"},
        max_output_tokens=8000,
    )
    assert sent.json["generationConfig"] == {
        "maxOutputTokens": 8000,
        "responseMimeType": "application/json",
        "responseSchema": schema,
        "thinkingConfig": {"thinkingBudget": 8000},
    }
    assert response.text == '{"ok": true}'


@pytest.mark.parametrize(("effort", "budget"), [("none", 0), ("low", 1024), ("max", 32768)])
def test_reasoning_effort_budgets(effort: str, budget: int) -> None:
    _, sent = _one(
        JsonReply(generate_body(text="x")), reasoning={"effort": effort}, max_output_tokens=40000
    )
    assert sent.json["generationConfig"]["thinkingConfig"] == {"thinkingBudget": budget}


def test_unknown_effort_and_provider_options_are_refused_before_sending() -> None:
    with LoopbackServer() as server:
        provider = _provider(server)
        with pytest.raises(ProviderCallError) as effort:
            call(provider, model_request(reasoning={"effort": "extreme"}))
        with pytest.raises(ProviderCallError) as option:
            call(provider, model_request(options={"store": True}))
    assert server.requests == []
    assert effort.value.code == "provider.invalid_request"
    assert "unknown option `store`" in option.value.message


def test_usage_mapping() -> None:
    usage = {"prompt": 100, "candidates": 20, "thoughts": 7, "cached": 40}
    response, _ = _one(JsonReply(generate_body(text="x", usage=usage)))
    # Cached tokens are part of promptTokenCount; thoughts are reported apart from output.
    assert response.usage == Usage(
        input_tokens=100, output_tokens=27, reasoning_tokens=7, cache_read_tokens=40
    )


def test_thought_parts_are_not_answer_text() -> None:
    body = generate_body(text="answer")
    body["candidates"][0]["content"]["parts"].insert(0, {"text": "musing", "thought": True})
    response, _ = _one(JsonReply(body))
    assert response.text == "answer"
    assert len(response.provider_items) == 2


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("STOP", "complete"),
        (None, "complete"),
        ("MAX_TOKENS", "max_tokens"),
        ("SAFETY", "refusal"),
        ("RECITATION", "refusal"),
        ("PROHIBITED_CONTENT", "refusal"),
    ],
)
def test_finish_reasons(reason: str | None, finish: str) -> None:
    response, _ = _one(JsonReply(generate_body(text="x", finish_reason=reason)))
    assert response.finish_reason == finish


def test_safety_stop_without_content_is_a_refusal() -> None:
    body = generate_body(finish_reason="SAFETY")
    del body["candidates"][0]["content"]
    response, _ = _one(JsonReply(body))
    assert (response.finish_reason, response.text) == ("refusal", None)


def test_blocked_prompt_is_a_refusal() -> None:
    body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}}
    response, _ = _one(JsonReply(body))
    assert response.finish_reason == "refusal"
    assert response.raw["blockReason"] == "SAFETY"
    assert response.usage.input_tokens == 9


def test_malformed_function_call_fails_as_applied() -> None:
    error = _failure(JsonReply(generate_body(finish_reason="MALFORMED_FUNCTION_CALL")))
    assert (error.code, error.applied, error.retryable) == (
        "provider.response_failed",
        "applied",
        False,
    )


def test_unknown_finish_reason_is_invalid() -> None:
    error = _failure(JsonReply(generate_body(text="x", finish_reason="TELEPORTED")))
    assert error.code == "provider.invalid_response"
    assert "`candidates[0].finishReason` is unknown" in error.message


def test_rate_limit_is_retryable_not_applied_with_retry_after() -> None:
    reply = JsonReply({"error": {"message": "quota"}}, status=429, headers={"Retry-After": "7"})
    error = _failure(reply)
    assert (error.code, error.applied, error.retryable) == (
        "provider.rate_limited",
        "not_applied",
        True,
    )
    assert error.retry_after_seconds == 7.0
    assert "HTTP 429: quota" in error.message


def test_server_error_is_retryable_not_applied() -> None:
    error = _failure(JsonReply({"error": {"message": "boom"}}, status=500))
    assert (error.code, error.applied, error.retryable, error.status) == (
        "provider.unavailable",
        "not_applied",
        True,
        500,
    )


def test_malformed_json_is_invalid_response() -> None:
    error = _failure(RawReply(b"{not json"))
    assert (error.code, error.applied) == ("provider.invalid_response", "applied")
    assert "`(body)` response body is not JSON" in error.message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"candidates": []}, "`candidates` is missing or empty"),
        (
            {"candidates": [{"content": {"parts": [{"text": 3}]}}]},
            "candidates[0].content.parts[0].text",
        ),
        (
            {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
            "candidates[0].content.parts[0].functionCall.name",
        ),
        (
            {"candidates": [{}], "usageMetadata": {"promptTokenCount": -1}},
            "usageMetadata.promptTokenCount",
        ),
    ],
)
def test_missing_or_mistyped_fields_are_named(body: Any, field: str) -> None:
    error = _failure(JsonReply(body))
    assert error.code == "provider.invalid_response"
    assert field in error.message


def test_hanging_server_is_uncertain() -> None:
    error = _failure(Hang(), timeout_seconds=0.3)
    assert (error.code, error.applied, error.retryable) == ("provider.timeout", "uncertain", False)


WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: gemini-agent
spec:
  policy: {{networkAllowlist: [127.0.0.1]}}
  providers:
    model:
      kind: google
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
      timeoutSeconds: 5
  tasks:
    - id: ask
      uses: agent:helper
      with: {{prompt: say hi}}
"""


def test_roll_runs_a_gemini_agent_with_a_tool_turn(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gk-e2e")
    with LoopbackServer() as server:
        agent = generate_agent("shout", {"text": "hi"}, "Done:")
        server.script(agent, agent)
        workflow = tmp_path / "wf.yaml"
        workflow.write_text(WORKFLOW.format(endpoint=server.url("/v1beta")))
        result = cli("--output", "json", "roll", workflow)
    assert result.exit_code == 0, result.stderr
    output = result.json()["data"]["output"]["ask"]
    assert output["text"] == 'Done: {"text":"hi"}'
    assert output["usage"]["inputTokens"] == 24
    assert [r.path for r in server.requests] == [PATH, PATH]
    assert server.requests[0].headers["x-goog-api-key"] == "gk-e2e"
    second = server.requests[1].json["contents"]
    assert second[1]["parts"] == [{"functionCall": {"name": "shout", "args": {"text": "hi"}}}]
    assert second[2]["parts"][0]["functionResponse"]["name"] == "shout"
