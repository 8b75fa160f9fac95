"""The scripted fake provider (docs/fake-provider.md), driven through ModelRequest.options."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

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
from agentctl.providers.fake import FAKE_CAPABILITIES, FakeProvider
from agentctl.providers.registry import build_provider

READ = ToolSpec("read_fixture", "Read a fixture", {"type": "object"})
ECHO = ToolSpec("echo", "Echo", {"type": "object"})


class RecordingSleep:
    """Injected sleep: records requested delays, never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _request(
    options: Mapping[str, Any] | None = None,
    *,
    messages: tuple[Message, ...] = (Message("user", "summarize the file"),),
    tools: tuple[ToolSpec, ...] = (),
    structured_output: Mapping[str, Any] | None = None,
) -> ModelRequest:
    return ModelRequest(
        provider="fake",
        model="scripted",
        instructions="be brief",
        messages=messages,
        tools=tools,
        max_output_tokens=2048,
        structured_output=structured_output,
        options=options or {},
        timeout_seconds=120,
    )


def _complete(provider: FakeProvider, request: ModelRequest) -> ModelResponse:
    return asyncio.run(provider.complete(request))


def test_identity_and_capabilities() -> None:
    provider = FakeProvider("local")
    assert (provider.name, provider.kind) == ("local", "fake")
    assert (
        provider.capabilities
        == FAKE_CAPABILITIES
        == frozenset(
            {
                "text",
                "usage",
                "cancellation",
                "function_tools",
                "continuation",
                "structured_output",
                "streaming",
            }
        )
    )


def test_default_answer_echoes_the_latest_user_text() -> None:
    messages = (
        Message("user", "first"),
        Message("assistant", "ok"),
        Message("user", "second"),
        Message("assistant", None, (ToolCall("c", "echo", {}),)),
        Message("tool", tool_call_id="c", tool_result={"x": 1}),
    )
    response = _complete(FakeProvider("fake"), _request(messages=messages))
    assert response.text == "fake: second"
    assert response.tool_calls == ()
    assert response.finish_reason == "complete"
    assert response.usage == Usage(input_tokens=1, output_tokens=1)
    assert response.response_id == "fake-1"


def test_final_text_wins_and_ignores_model_and_instructions() -> None:
    response = _complete(FakeProvider("fake"), _request({"finalText": "done"}))
    assert response.text == "done"
    assert response.finish_reason == "complete"


def test_structured_output_text_is_passed_through_unchanged() -> None:
    text = '{"verdict": "ok",  "score": 3}'
    request = _request({"finalText": text}, structured_output={"type": "object"})
    response = _complete(FakeProvider("fake"), request)
    assert response.text == text
    assert json.loads(response.text) == {"verdict": "ok", "score": 3}


def test_tool_input_calls_the_first_tool_before_any_tool_result() -> None:
    provider = FakeProvider("fake")
    options = {"toolInput": {"path": "a.txt"}, "finalText": "read it"}
    first = _complete(provider, _request(options, tools=(READ, ECHO)))
    assert first.text is None
    assert first.tool_calls == (ToolCall("fake-call-1", "read_fixture", {"path": "a.txt"}),)
    assert first.finish_reason == "tool_calls"
    assert first.usage == Usage(1, 1)
    conversation = (
        Message("user", "summarize the file"),
        Message("assistant", None, first.tool_calls),
        Message("tool", tool_call_id="fake-call-1", tool_result={"content": "x"}),
    )
    second = _complete(provider, _request(options, messages=conversation, tools=(READ, ECHO)))
    assert second.tool_calls == ()
    assert second.text == "read it"
    assert second.finish_reason == "complete"


def test_tool_input_without_tools_answers_with_text() -> None:
    response = _complete(FakeProvider("fake"), _request({"toolInput": {"path": "a"}}))
    assert response.tool_calls == ()
    assert response.text == "fake: summarize the file"


def test_delay_uses_the_injected_sleep() -> None:
    sleep = RecordingSleep()
    provider = FakeProvider("fake", sleep=sleep)
    _complete(provider, _request({"delayMs": 250}))
    _complete(provider, _request({"delayMs": 0}))
    assert sleep.delays == [0.25]


def test_delay_is_cancellable_and_a_cancelled_call_is_not_counted() -> None:
    gate = asyncio.Event()

    async def blocking_sleep(seconds: float) -> None:
        gate.set()
        await asyncio.Event().wait()

    provider = FakeProvider("fake", sleep=blocking_sleep)

    async def scenario() -> None:
        task = asyncio.create_task(provider.complete(_request({"delayMs": 5000})))
        await gate.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert provider.calls == 0


def test_fail_first_counter_is_shared_by_every_agent_of_the_provider() -> None:
    provider = FakeProvider("fake")
    agent_a = _request({"failFirst": 2})
    agent_b = _request({"failFirst": 2, "finalText": "b"})
    failures: list[ProviderCallError] = []
    for request in (agent_a, agent_b):
        with pytest.raises(ProviderCallError) as caught:
            _complete(provider, request)
        failures.append(caught.value)
    assert [(f.message, f.status, f.request_id) for f in failures] == [
        ("scripted transient failure", 503, "fake-1"),
        ("scripted transient failure", 503, "fake-2"),
    ]
    assert all(f.retryable and f.applied == "not_applied" for f in failures)
    assert isinstance(failures[0], ProviderError) and failures[0].exit_code == 6
    assert _complete(provider, agent_a).text == "fake: summarize the file"
    assert _complete(provider, agent_b).response_id == "fake-4"
    # Another provider entry has its own counter.
    other = FakeProvider("other")
    with pytest.raises(ProviderCallError):
        _complete(other, agent_a)


def test_invalid_options_fail_without_counting() -> None:
    provider = FakeProvider("fake")
    invalid: list[dict[str, Any]] = [
        {"delayMs": -1},
        {"failFirst": True},
        {"finalText": 3},
        {"toolInput": []},
        {"temperature": 0},
    ]
    for options in invalid:
        with pytest.raises(ProviderCallError) as caught:
            _complete(provider, _request(options))
        assert caught.value.code == "provider.invalid_request"
        assert not caught.value.retryable
    assert provider.calls == 0


def test_build_provider_builds_the_fake_and_refuses_unknown_kinds() -> None:
    sleep = RecordingSleep()
    provider = build_provider("local", {"kind": "fake"}, sleep=sleep)
    assert isinstance(provider, FakeProvider)
    assert provider.name == "local"
    asyncio.run(provider.complete(_request({"delayMs": 10})))
    assert sleep.delays == [0.01]
    with pytest.raises(ProviderError) as unknown:
        build_provider("x", {"kind": "llama"})
    assert unknown.value.code == "provider.unknown_kind"
