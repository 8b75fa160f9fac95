"""Additive request/response fields, wire helpers, and HTTP plumbing edge cases."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentctl.digest import canonical_json
from agentctl.errors import ProviderError
from agentctl.providers.base import (
    Message,
    ModelRequest,
    ModelResponse,
    ProviderCallError,
    ToolCall,
    Usage,
)
from agentctl.providers.registry import build_provider
from agentctl.providers.wire import parse_arguments, strict_compatible
from agentctl.spec.capabilities import PROVIDER_CAPABILITIES
from tests.fixtures.llm_servers.model_requests import call, model_request
from tests.fixtures.llm_servers.openai_wire import chat_body, responses_body
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer, SseReply


def test_new_request_fields_are_omitted_at_their_defaults() -> None:
    plain = model_request()
    assert "reasoning" not in plain.to_json() and "stream" not in plain.to_json()
    rich = model_request(reasoning={"effort": "low"}, stream=True)
    data = rich.to_json()
    assert (data["reasoning"], data["stream"]) == ({"effort": "low"}, True)
    assert ModelRequest.from_json(json.loads(canonical_json(data))) == rich
    assert ModelRequest.from_json(json.loads(canonical_json(plain.to_json()))) == plain


def test_new_message_and_response_fields_round_trip() -> None:
    item = {"type": "reasoning", "id": "rs_1"}
    message = Message(
        "assistant", None, (ToolCall("c", "t", {}),), response_id="r1", provider_items=(item,)
    )
    data = message.to_json()
    assert (data["responseId"], data["providerItems"]) == ("r1", [item])
    assert Message.from_json(data) == message
    assert "responseId" not in Message("user", "hi").to_json()
    response = ModelResponse("x", (), "complete", Usage(1, 2), "r1", {}, provider_items=(item,))
    assert response.to_json()["providerItems"] == [item]
    assert ModelResponse.from_json(response.to_json()) == response
    assert "providerItems" not in ModelResponse("x", (), "complete", Usage()).to_json()


def test_bad_new_fields_are_invalid() -> None:
    data = model_request().to_json()
    with pytest.raises(ProviderError) as caught:
        ModelRequest.from_json({**data, "stream": "yes"})
    assert str(caught.value) == "invalid model request: `stream`: input should be a valid boolean"
    assert caught.value.code == "provider.invalid_response"
    with pytest.raises(ProviderError) as caught:
        Message.from_json({**Message("user", "x").to_json(), "providerItems": [1]})
    assert str(caught.value).startswith("invalid message: `providerItems.0`: input should be")


def test_provider_call_error_keeps_retry_after() -> None:
    error = ProviderCallError("x", retryable=True, applied="not_applied", retry_after_seconds=2.0)
    assert error.retry_after_seconds == 2.0
    assert ProviderCallError("x", retryable=False, applied="uncertain").retry_after_seconds is None


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
                "additionalProperties": False,
            },
            True,
        ),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, False),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": False,
            },
            False,
        ),
        (
            {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": {"type": "object", "properties": {}}}
                },
                "required": ["items"],
                "additionalProperties": False,
            },
            False,
        ),
        ({"type": "string"}, True),
        ({"anyOf": [{"type": "object", "properties": {}, "additionalProperties": False}]}, True),
    ],
)
def test_strict_compatible(schema: dict[str, Any], strict: bool) -> None:
    assert strict_compatible(schema) is strict


def test_parse_arguments_paths() -> None:
    assert parse_arguments("p", "", "x") == {}
    assert parse_arguments("p", {"a": 1}, "x") == {"a": 1}
    with pytest.raises(ProviderCallError) as caught:
        parse_arguments("p", "[1]", "calls[0].arguments")
    assert "`calls[0].arguments` must encode an object, got list" in caught.value.message


def test_capability_table_matches_the_reference() -> None:
    base = {"text", "usage", "cancellation"}
    assert PROVIDER_CAPABILITIES["openai"] == base | {
        "function_tools",
        "structured_output",
        "reasoning_effort",
        "reasoning_mode",
        "continuation",
        "persisted_reasoning",
        "prompt_caching",
        "multiple_function_calls",
        "response_storage",
        "streaming",
    }
    assert PROVIDER_CAPABILITIES["azure_openai"] == PROVIDER_CAPABILITIES["openai"]
    assert PROVIDER_CAPABILITIES["anthropic"] == base | {
        "function_tools",
        "structured_output",
        "reasoning_effort",
        "continuation",
        "streaming",
    }
    assert PROVIDER_CAPABILITIES["command"] == base
    assert "cost_metadata" not in set().union(*PROVIDER_CAPABILITIES.values())


def test_server_ignoring_stream_true_answers_json_and_is_still_read() -> None:
    with LoopbackServer() as server:
        server.script(
            JsonReply(chat_body(text="not streamed")), JsonReply(responses_body(text="r"))
        )
        chat = build_provider(
            "p", {"kind": "openai", "endpoint": server.url("/v1/chat/completions")}, environ={}
        )
        responses = build_provider(
            "p", {"kind": "openai", "endpoint": server.url("/v1/responses")}, environ={}
        )
        assert call(chat, model_request(stream=True)).text == "not streamed"
        assert call(responses, model_request(stream=True)).text == "r"


def test_sse_comments_and_multiline_data_are_handled() -> None:
    body = responses_body(text="multi")
    final = json.dumps({"type": "response.completed", "response": body}, indent=1)
    # A multi-line JSON payload arrives as several `data:` lines joined by newlines.
    reply = SseReply(
        (
            (":", "keep-alive"),
            (None, "[DONE]"),
            ("response.completed", final.replace("\n", "\ndata: ")),
        )
    )
    with LoopbackServer() as server:
        server.script(reply)
        provider = build_provider(
            "p", {"kind": "openai", "endpoint": server.url("/v1/responses")}, environ={}
        )
        assert call(provider, model_request(stream=True)).text == "multi"


def test_error_detail_never_echoes_the_credential() -> None:
    reply = JsonReply(
        {"error": {"message": "Incorrect API key provided: sk-leaky-123"}}, status=401
    )
    with LoopbackServer() as server:
        server.script(reply)
        provider = build_provider(
            "p",
            {"kind": "openai", "endpoint": server.url("/v1/responses"), "credential": {"env": "K"}},
            environ={"K": "sk-leaky-123"},
        )
        with pytest.raises(ProviderCallError) as caught:
            call(provider, model_request())
    assert "sk-leaky-123" not in caught.value.message
    assert "Incorrect API key provided: [REDACTED]" in caught.value.message
