"""Provider request/response values and their journaled JSON forms."""

from __future__ import annotations

import json

import pytest

from agentctl.digest import canonical_json
from agentctl.errors import ProviderError
from agentctl.providers.base import (
    Message,
    ModelRequest,
    ModelResponse,
    ProviderCallError,
    ToolCall,
    ToolSpec,
    Usage,
)

REQUEST = ModelRequest(
    provider="fake",
    model="scripted",
    instructions="be brief",
    messages=(
        Message("user", "hi"),
        Message("assistant", None, (ToolCall("fake-call-1", "echo", {"x": 1}),)),
        Message("tool", tool_call_id="fake-call-1", tool_result={"x": 1}),
    ),
    tools=(ToolSpec("echo", "Echo input", {"type": "object"}),),
    max_output_tokens=2048,
    structured_output=None,
    options={"finalText": "ok"},
    timeout_seconds=120,
)


def test_request_json_has_a_fixed_shape_and_key_order() -> None:
    data = REQUEST.to_json()
    assert list(data) == [
        "provider",
        "model",
        "instructions",
        "messages",
        "tools",
        "maxOutputTokens",
        "structuredOutput",
        "options",
        "timeoutSeconds",
    ]
    assert data["messages"][1] == {
        "role": "assistant",
        "text": None,
        "toolCalls": [{"id": "fake-call-1", "name": "echo", "input": {"x": 1}}],
        "toolCallId": None,
        "toolResult": None,
    }
    assert data["tools"] == [
        {"name": "echo", "description": "Echo input", "inputSchema": {"type": "object"}}
    ]
    json.dumps(data)  # JSON-serializable as is
    assert ModelRequest.from_json(json.loads(canonical_json(data))) == REQUEST


def test_response_round_trips_through_json() -> None:
    response = ModelResponse(
        text=None,
        tool_calls=(ToolCall("c1", "echo", {"a": [1, 2]}),),
        finish_reason="tool_calls",
        usage=Usage(3, 4, 1, 2, 0),
        response_id="r-1",
        raw={"provider": "fake"},
    )
    data = response.to_json()
    assert data == {
        "text": None,
        "toolCalls": [{"id": "c1", "name": "echo", "input": {"a": [1, 2]}}],
        "finishReason": "tool_calls",
        "usage": {
            "inputTokens": 3,
            "outputTokens": 4,
            "reasoningTokens": 1,
            "cacheReadTokens": 2,
            "cacheWriteTokens": 0,
        },
        "responseId": "r-1",
        "raw": {"provider": "fake"},
    }
    assert ModelResponse.from_json(json.loads(json.dumps(data))) == response


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"finishReason": "stop", "toolCalls": [], "usage": {}},
        {"finishReason": "complete", "text": 3},
        {"finishReason": "complete", "toolCalls": [{"id": "x", "name": "y"}]},
        {"finishReason": "complete", "usage": {"inputTokens": "1"}},
        {"finishReason": "complete", "usage": {"inputTokens": True}},
    ],
)
def test_invalid_stored_responses_are_provider_errors(data: object) -> None:
    with pytest.raises(ProviderError) as caught:
        ModelResponse.from_json(data)
    assert caught.value.code == "provider.invalid_response"


def test_usage_adds_field_by_field() -> None:
    total = Usage(1, 1) + Usage(2, 3, 4, 5, 6)
    assert total == Usage(3, 4, 4, 5, 6)
    assert Usage().to_json() == {
        "inputTokens": 0,
        "outputTokens": 0,
        "reasoningTokens": 0,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
    }


def test_provider_call_error_carries_retry_and_certainty() -> None:
    error = ProviderCallError(
        "read timed out", retryable=False, applied="uncertain", status=None, request_id="req-9"
    )
    assert isinstance(error, ProviderError)
    assert error.code == "provider.call_failed"
    assert (error.retryable, error.applied, error.status, error.request_id) == (
        False,
        "uncertain",
        None,
        "req-9",
    )
    assert str(error) == "read timed out"
