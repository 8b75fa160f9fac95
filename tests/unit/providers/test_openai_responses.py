"""The OpenAI Responses provider against a loopback server speaking the Responses format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentctl.providers.base import Message, ModelResponse, ProviderCallError, ToolCall, Usage
from agentctl.providers.openai import OpenAIResponsesProvider, build_azure_openai, build_openai
from agentctl.spec.capabilities import OPENAI_CAPABILITIES
from tests.fixtures.llm_servers.model_requests import WEATHER, call, model_request
from tests.fixtures.llm_servers.openai_wire import (
    responses_agent,
    responses_body,
    responses_stream,
)
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer, Recorded, SseReply

ENV = {"OPENAI_API_KEY": "sk-test-123"}


def _provider(server: LoopbackServer, **kw: Any) -> OpenAIResponsesProvider:
    provider = build_openai(
        "llm", {"kind": "openai", "endpoint": server.url("/v1/responses")}, environ=ENV, **kw
    )
    assert isinstance(provider, OpenAIResponsesProvider)
    return provider


def _one(reply: Any, **request: Any) -> tuple[ModelResponse, Recorded]:
    with LoopbackServer() as server:
        server.script(reply)
        response = call(_provider(server), model_request(**request))
    return response, server.requests[0]


def test_plain_text_request_and_response() -> None:
    response, sent = _one(JsonReply(responses_body(text="Hello there")))
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test-123"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["accept"] == "application/json"
    assert sent.headers["user-agent"].startswith("agentctl/")
    assert sent.json == {
        "model": "test-model",
        "instructions": "be brief",
        "input": [{"role": "user", "content": "hello"}],
        "max_output_tokens": 256,
    }
    assert response.text == "Hello there"
    assert response.finish_reason == "complete"
    assert response.response_id == "resp_1"
    assert response.usage == Usage(
        input_tokens=12, output_tokens=7, reasoning_tokens=3, cache_read_tokens=4
    )
    assert response.raw["api"] == "responses"


def test_tool_turn_round_trip_sends_function_call_items() -> None:
    with LoopbackServer() as server:
        server.script(responses_agent("get_weather", {"city": "Oslo"}, "It is"))
        server.script(responses_agent("get_weather", {"city": "Oslo"}, "It is"))
        provider = _provider(server)
        first = call(provider, model_request(tools=(WEATHER,)))
        assert first.finish_reason == "tool_calls"
        assert first.tool_calls == (ToolCall("call_1", "get_weather", {"city": "Oslo"}),)
        assert first.text is None
        messages = (
            Message("user", "hello"),
            Message("assistant", None, first.tool_calls, response_id=first.response_id),
            Message("tool", tool_call_id="call_1", tool_result={"temp": 3}),
        )
        second = call(provider, model_request(tools=(WEATHER,), messages=messages))
    assert second.text == 'It is {"temp":3}'
    assert second.finish_reason == "complete"
    body = server.requests[1].json
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Look up the weather",
            "parameters": dict(WEATHER.input_schema),
            "strict": True,
        }
    ]
    assert body["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp":3}'},
    ]
    assert "previous_response_id" not in body


def test_store_true_continues_with_previous_response_id() -> None:
    messages = (
        Message("user", "hello"),
        Message("assistant", None, (ToolCall("call_1", "get_weather", {}),), response_id="r9"),
        Message("tool", tool_call_id="call_1", tool_result="sunny"),
    )
    _, sent = _one(
        JsonReply(responses_body(text="ok")),
        messages=messages,
        options={"store": True, "parallelToolCalls": False, "safetyIdentifier": "u-1"},
        tools=(WEATHER,),
    )
    body = sent.json
    assert body["previous_response_id"] == "r9"
    assert body["input"] == [
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    ]
    assert (body["store"], body["parallel_tool_calls"], body["safety_identifier"]) == (
        True,
        False,
        "u-1",
    )


def test_current_turn_context_sends_the_whole_conversation() -> None:
    messages = (
        Message("user", "hello"),
        Message(
            "assistant",
            "thinking aloud",
            response_id="r9",
            provider_items=({"type": "reasoning", "id": "rs_0"},),
        ),
        Message("user", "more"),
    )
    _, sent = _one(
        JsonReply(responses_body(text="ok")),
        messages=messages,
        options={"store": True, "reasoningContext": "current_turn"},
    )
    assert "previous_response_id" not in sent.json
    assert sent.json["input"] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "thinking aloud"},
        {"role": "user", "content": "more"},
    ]


def test_structured_output_and_reasoning_mapping() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    response, sent = _one(
        JsonReply(responses_body(text='{"n": 1}', reasoning=True)),
        structured_output=schema,
        reasoning={"effort": "max", "mode": "concise"},
        options={"store": False, "promptCacheMode": "explicit", "promptCacheTtl": "30m"},
    )
    body = sent.json
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "output", "schema": schema, "strict": False}
    }
    assert body["reasoning"] == {"effort": "xhigh", "summary": "concise"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["store"] is False
    assert body["prompt_cache_key"].startswith("agentctl-")
    assert response.provider_items == (
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc=="},
    )


def test_reasoning_items_are_sent_back_before_the_assistant_turn() -> None:
    item = {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc=="}
    messages = (
        Message("user", "hello"),
        Message("assistant", None, (ToolCall("c1", "get_weather", {}),), provider_items=(item,)),
        Message("tool", tool_call_id="c1", tool_result=1),
    )
    _, sent = _one(JsonReply(responses_body(text="ok")), messages=messages, tools=(WEATHER,))
    assert [entry.get("type") for entry in sent.json["input"]] == [
        None,
        "reasoning",
        "function_call",
        "function_call_output",
    ]


@pytest.mark.parametrize(
    ("body", "finish", "text"),
    [
        (
            responses_body(status="incomplete", incomplete_reason="max_output_tokens", text="par"),
            "max_tokens",
            "par",
        ),
        (responses_body(status="incomplete", incomplete_reason="content_filter"), "refusal", None),
        (responses_body(refusal="I can't help with that"), "refusal", "I can't help with that"),
    ],
)
def test_finish_reasons(body: Any, finish: str, text: str | None) -> None:
    response, _ = _one(JsonReply(body))
    assert (response.finish_reason, response.text) == (finish, text)


def test_failed_response_is_an_applied_error() -> None:
    body = {**responses_body(), "status": "failed", "error": {"message": "server overloaded"}}
    with LoopbackServer() as server:
        server.script(JsonReply(body))
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request())
    assert (caught.value.code, caught.value.applied) == ("provider.response_failed", "applied")
    assert "server overloaded" in caught.value.message


def test_invalid_tool_arguments_name_the_field() -> None:
    body = responses_body(calls=[("c1", "get_weather", {})])
    body["output"][0]["arguments"] = "{not json"
    with LoopbackServer() as server:
        server.script(JsonReply(body))
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request(tools=(WEATHER,)))
    assert caught.value.code == "provider.invalid_response"
    assert "`output[0].arguments` is not valid JSON" in caught.value.message


def test_unknown_option_is_refused_before_sending() -> None:
    with LoopbackServer() as server:
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request(options={"temperature": 0}))
    assert server.requests == []
    assert (caught.value.code, caught.value.applied) == ("provider.invalid_request", "not_applied")
    assert "unknown option `temperature`" in caught.value.message


def test_streaming_parses_the_final_event_and_forwards_deltas() -> None:
    deltas: list[str] = []
    body = responses_body(text="Streaming works fine")
    with LoopbackServer() as server:
        server.script(responses_stream(body))
        response = call(_provider(server, on_text_delta=deltas.append), model_request(stream=True))
    assert server.requests[0].json["stream"] is True
    assert server.requests[0].headers["accept"] == "text/event-stream"
    assert response.text == "Streaming works fine"
    assert "".join(deltas) == "Streaming works fine"
    assert response.usage.input_tokens == 12


def test_streaming_without_final_event_is_uncertain() -> None:
    body = responses_body(text="cut")
    for reply in (responses_stream(body, cut=True), SseReply(responses_stream(body).events[:2])):
        with LoopbackServer() as server:
            server.script(reply)
            with pytest.raises(ProviderCallError) as caught:
                call(_provider(server), model_request(stream=True))
        assert caught.value.applied == "uncertain"
        assert caught.value.code in ("provider.stream_incomplete", "provider.connection_lost")


def test_stream_error_event() -> None:
    reply = SseReply((("error", json.dumps({"type": "error", "message": "bad things"})),))
    with LoopbackServer() as server:
        server.script(reply)
        with pytest.raises(ProviderCallError) as caught:
            call(_provider(server), model_request(stream=True))
    assert (caught.value.code, caught.value.applied) == ("provider.stream_error", "applied")


def test_azure_uses_api_key_header_and_api_version() -> None:
    with LoopbackServer() as server:
        server.script(JsonReply(responses_body(text="hi")))
        provider = build_azure_openai(
            "az",
            {
                "kind": "azure_openai",
                "endpoint": server.url("/openai/v1/responses"),
                "apiVersion": "preview",
            },
            environ={"AZURE_OPENAI_API_KEY": "az-key"},
        )
        assert provider.kind == "azure_openai"
        call(provider, model_request())
    sent = server.requests[0]
    assert sent.path == "/openai/v1/responses?api-version=preview"
    assert sent.headers["api-key"] == "az-key"
    assert "authorization" not in sent.headers


def test_capabilities_are_the_reference_set() -> None:
    assert OpenAIResponsesProvider.capabilities == OPENAI_CAPABILITIES
    assert "persisted_reasoning" in OPENAI_CAPABILITIES
