"""The Anthropic Messages provider over a loopback server speaking the Messages format."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.providers.anthropic import (
    ANTHROPIC_VERSION,
    AnthropicProvider,
    build_anthropic,
)
from agentctl.providers.base import Message, ModelResponse, ProviderCallError, ToolCall, Usage
from tests.fixtures.llm_servers.anthropic_wire import message_agent, message_body, message_stream
from tests.fixtures.llm_servers.model_requests import WEATHER, call, model_request
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer, Recorded

ENV = {"ANTHROPIC_API_KEY": "ak-test-1"}


def _provider(server: LoopbackServer, **kw: Any) -> AnthropicProvider:
    return build_anthropic(
        "claude", {"kind": "anthropic", "endpoint": server.url("/v1/messages")}, environ=ENV, **kw
    )


def _one(reply: Any, **request: Any) -> tuple[ModelResponse, Recorded]:
    with LoopbackServer() as server:
        server.script(reply)
        response = call(_provider(server), model_request(**request))
    return response, server.requests[0]


def test_plain_request_headers_and_usage() -> None:
    response, sent = _one(JsonReply(message_body(text="Bonjour")))
    assert sent.headers["x-api-key"] == "ak-test-1"
    assert sent.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "authorization" not in sent.headers
    assert sent.json == {
        "model": "test-model",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "system": "be brief",
    }
    assert response.text == "Bonjour"
    assert response.finish_reason == "complete"
    # input_tokens excludes cache tokens on the wire; agentctl's total includes them.
    assert response.usage == Usage(
        input_tokens=13, output_tokens=6, cache_read_tokens=2, cache_write_tokens=1
    )
    assert response.response_id == "msg_1"


def test_tool_use_round_trip_merges_tool_results_into_one_user_turn() -> None:
    with LoopbackServer() as server:
        server.script(message_agent("get_weather", {"city": "Oslo"}, "It is"))
        server.script(message_agent("get_weather", {"city": "Oslo"}, "It is"))
        provider = _provider(server)
        first = call(provider, model_request(tools=(WEATHER,)))
        assert first.finish_reason == "tool_calls"
        assert first.tool_calls == (ToolCall("toolu_1", "get_weather", {"city": "Oslo"}),)
        messages = (
            Message("user", "hello"),
            Message(
                "assistant",
                "Let me check.",
                (*first.tool_calls, ToolCall("toolu_2", "get_weather", {"city": "Rome"})),
            ),
            Message("tool", tool_call_id="toolu_1", tool_result={"temp": 3}),
            Message("tool", tool_call_id="toolu_2", tool_result="warm"),
        )
        second = call(provider, model_request(tools=(WEATHER,), messages=messages))
    assert second.text == "It is warm"
    body = server.requests[1].json
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Look up the weather",
            "input_schema": dict(WEATHER.input_schema),
        }
    ]
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp":3}'},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "warm"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "complete"),
        ("stop_sequence", "complete"),
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "max_tokens"),
    ],
)
def test_stop_reason_mapping(stop: str, finish: str) -> None:
    response, _ = _one(JsonReply(message_body(text="x", stop_reason=stop)))
    assert response.finish_reason == finish


def test_unknown_stop_reason_is_invalid() -> None:
    with LoopbackServer() as server:
        server.script(JsonReply(message_body(text="x", stop_reason="teleported")))
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request())
    assert caught.value.code == "provider.invalid_response"
    assert "`stop_reason` is unknown" in caught.value.message


def test_thinking_budget_structured_output_and_thinking_blocks_kept() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    response, sent = _one(
        JsonReply(message_body(text='{"ok": true}', thinking="hmm")),
        structured_output=schema,
        reasoning={"effort": "high"},
        max_output_tokens=8000,
    )
    assert sent.json["thinking"] == {"type": "enabled", "budget_tokens": 7999}
    assert sent.json["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert response.provider_items == (
        {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
    )
    assert response.text == '{"ok": true}'


def test_thinking_blocks_go_back_first_in_the_assistant_turn() -> None:
    block = {"type": "thinking", "thinking": "hmm", "signature": "sig=="}
    messages = (
        Message("user", "hello"),
        Message("assistant", None, (ToolCall("t1", "get_weather", {}),), provider_items=(block,)),
        Message("tool", tool_call_id="t1", tool_result=1),
    )
    _, sent = _one(JsonReply(message_body(text="ok")), messages=messages, tools=(WEATHER,))
    assert [b["type"] for b in sent.json["messages"][1]["content"]] == ["thinking", "tool_use"]


def test_reasoning_with_too_few_output_tokens_is_refused_before_sending() -> None:
    with LoopbackServer() as server:
        with pytest.raises(ProviderCallError) as caught:
            call(
                _provider(server), model_request(reasoning={"effort": "low"}, max_output_tokens=900)
            )
    assert server.requests == []
    assert (caught.value.code, caught.value.applied) == ("provider.invalid_request", "not_applied")


def test_provider_options_are_refused() -> None:
    with LoopbackServer() as server:
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request(options={"store": True}))
    assert "unknown option `store`" in caught.value.message


def test_streaming_assembles_text_thinking_and_tool_use() -> None:
    body = message_body(
        text="Checking the weather",
        thinking="plan",
        calls=[("toolu_7", "get_weather", {"city": "Lima"})],
        stop_reason="tool_use",
    )
    deltas: list[str] = []
    with LoopbackServer() as server:
        server.script(message_stream(body))
        response = call(
            _provider(server, on_text_delta=deltas.append),
            model_request(stream=True, tools=(WEATHER,)),
        )
    assert server.requests[0].json["stream"] is True
    assert response.text == "Checking the weather"
    assert "".join(deltas) == "Checking the weather"
    assert response.tool_calls == (ToolCall("toolu_7", "get_weather", {"city": "Lima"}),)
    assert response.finish_reason == "tool_calls"
    assert response.provider_items == (
        {"type": "thinking", "thinking": "plan", "signature": "sig=="},
    )
    assert response.usage.output_tokens == 6


def test_stream_without_message_stop_is_uncertain() -> None:
    body = message_body(text="partial")
    for reply in (message_stream(body, stop=False), message_stream(body, stop=False, cut=True)):
        with LoopbackServer() as server:
            server.script(reply)
            with pytest.raises(ProviderCallError) as caught:
                call(_provider(server), model_request(stream=True))
        assert caught.value.applied == "uncertain"
