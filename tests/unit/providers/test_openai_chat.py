"""Chat Completions mode (Ollama, vLLM, llama.cpp, LM Studio) over a loopback server."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.providers.base import Message, ModelResponse, ProviderCallError, ToolCall, Usage
from agentctl.providers.openai import (
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    build_openai,
    is_chat_endpoint,
)
from agentctl.spec.capabilities import CHAT_CAPABILITIES
from tests.fixtures.llm_servers.model_requests import WEATHER, call, model_request
from tests.fixtures.llm_servers.openai_wire import chat_agent, chat_body, chat_stream
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer, Recorded


def _provider(
    server: LoopbackServer, environ: dict[str, str] | None = None, **kw: Any
) -> OpenAIChatProvider:
    provider = build_openai(
        "local",
        {"kind": "openai", "endpoint": server.url("/v1/chat/completions")},
        environ=environ if environ is not None else {},
        **kw,
    )
    assert isinstance(provider, OpenAIChatProvider)
    return provider


def _one(reply: Any, **request: Any) -> tuple[ModelResponse, Recorded]:
    with LoopbackServer() as server:
        server.script(reply)
        response = call(_provider(server), model_request(**request))
    return response, server.requests[0]


def test_endpoint_selects_the_api() -> None:
    assert is_chat_endpoint("http://localhost:11434/v1/chat/completions")
    assert is_chat_endpoint("http://localhost:8000/v1/chat/completions/")
    assert not is_chat_endpoint("https://api.openai.com/v1/responses")
    base = build_openai("o", {"kind": "openai", "endpoint": "http://127.0.0.1:1/v1"}, environ={})
    assert isinstance(base, OpenAIResponsesProvider)
    assert base.endpoint.target.url == "http://127.0.0.1:1/v1/responses"


def test_loopback_server_needs_no_key_and_gets_none() -> None:
    response, sent = _one(JsonReply(chat_body(text="hi from llama")))
    assert "authorization" not in sent.headers
    assert sent.path == "/v1/chat/completions"
    assert sent.json == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
        ],
        "max_tokens": 256,
    }
    assert response.text == "hi from llama"
    assert response.usage == Usage(input_tokens=20, output_tokens=5)
    assert response.response_id == "chatcmpl-1"


def test_loopback_uses_the_default_key_when_set() -> None:
    with LoopbackServer() as server:
        server.script(JsonReply(chat_body(text="x")))
        call(_provider(server, {"OPENAI_API_KEY": "sk-local"}), model_request())
    assert server.requests[0].headers["authorization"] == "Bearer sk-local"


def test_tool_turn_round_trip() -> None:
    with LoopbackServer() as server:
        server.script(chat_agent("get_weather", {"city": "Oslo"}, "It is"))
        server.script(chat_agent("get_weather", {"city": "Oslo"}, "It is"))
        provider = _provider(server)
        first = call(provider, model_request(tools=(WEATHER,)))
        assert first.tool_calls == (ToolCall("call_1", "get_weather", {"city": "Oslo"}),)
        assert first.finish_reason == "tool_calls"
        messages = (
            Message("user", "hello"),
            Message("assistant", None, first.tool_calls),
            Message("tool", tool_call_id="call_1", tool_result={"temp": 3}),
        )
        second = call(
            provider,
            model_request(tools=(WEATHER,), messages=messages, options={"parallelToolCalls": True}),
        )
    assert second.text == 'It is {"temp":3}'
    body = server.requests[1].json
    assert body["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp":3}'},
    ]
    assert body["tools"][0]["function"]["strict"] is True
    assert body["parallel_tool_calls"] is True


def test_structured_output_and_reasoning_effort() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    _, sent = _one(
        JsonReply(chat_body(text='{"n":1}')),
        structured_output=schema,
        reasoning={"effort": "low"},
    )
    assert sent.json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": True},
    }
    assert sent.json["reasoning_effort"] == "low"


@pytest.mark.parametrize(
    ("body", "finish"),
    [
        (chat_body(text="cut", finish="length"), "max_tokens"),
        (chat_body(text=None, refusal="no", finish="stop"), "refusal"),
        (chat_body(text="x", finish="content_filter"), "refusal"),
        # Some servers report "stop" next to tool calls; the calls decide.
        (chat_body(calls=[("c", "get_weather", {})], finish="stop"), "tool_calls"),
        (chat_body(text="x", finish=None), "complete"),
    ],
)
def test_finish_reasons(body: Any, finish: str) -> None:
    response, _ = _one(JsonReply(body))
    assert response.finish_reason == finish


def test_lenient_where_servers_differ() -> None:
    body = chat_body(
        calls=[("c1", "get_weather", "")],
        include_usage=False,
        completion_id=None,
        finish="tool_calls",
    )
    body["choices"][0]["message"]["tool_calls"].append(
        {
            "id": "c2",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Rome"}},
        }
    )
    response, _ = _one(JsonReply(body))
    assert response.usage == Usage()
    assert response.response_id is None
    assert response.tool_calls == (
        ToolCall("c1", "get_weather", {}),
        ToolCall("c2", "get_weather", {"city": "Rome"}),
    )


def test_unknown_finish_reason_and_empty_choices_are_invalid() -> None:
    for body, path in (
        (chat_body(text="x", finish="exploded"), "`choices[0].finish_reason`"),
        ({**chat_body(text="x"), "choices": []}, "`choices`"),
        ({**chat_body(text="x"), "usage": {"prompt_tokens": -1}}, "`usage.prompt_tokens`"),
    ):
        with LoopbackServer() as server:
            server.script(JsonReply(body))
            with pytest.raises(ProviderCallError) as caught:
                call(_provider(server), model_request())
        assert caught.value.code == "provider.invalid_response"
        assert path in caught.value.message


def test_streaming_assembles_text_tool_calls_and_usage() -> None:
    deltas: list[str] = []
    with LoopbackServer() as server:
        server.script(chat_stream(text="Hello streaming world"))
        server.script(
            chat_stream(calls=[("call_9", "get_weather", {"city": "Lima"})], finish="tool_calls")
        )
        provider = _provider(server, on_text_delta=deltas.append)
        text = call(provider, model_request(stream=True))
        tools = call(provider, model_request(stream=True, tools=(WEATHER,)))
    assert server.requests[0].json["stream_options"] == {"include_usage": True}
    assert text.text == "Hello streaming world"
    assert "".join(deltas) == "Hello streaming world"
    assert text.usage == Usage(input_tokens=9, output_tokens=4)
    assert text.response_id == "chatcmpl-s"
    assert tools.tool_calls == (ToolCall("call_9", "get_weather", {"city": "Lima"}),)
    assert tools.finish_reason == "tool_calls"


def test_stream_without_done_is_uncertain() -> None:
    for reply in (
        chat_stream(text="abc", done=False),
        chat_stream(text="abc", cut=True, done=False),
    ):
        with LoopbackServer() as server:
            server.script(reply)
            with pytest.raises(ProviderCallError) as caught:
                call(_provider(server), model_request(stream=True))
        assert caught.value.applied == "uncertain"


def test_chat_mode_capabilities_drop_server_side_state() -> None:
    assert OpenAIChatProvider.capabilities == CHAT_CAPABILITIES
    assert "response_storage" not in CHAT_CAPABILITIES
    assert {"function_tools", "structured_output", "streaming"} <= CHAT_CAPABILITIES
