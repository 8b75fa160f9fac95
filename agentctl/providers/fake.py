"""The scripted ``fake`` provider (docs/fake-provider.md): offline, deterministic, no credential.

Everything it does is driven by the agent's ``providerOptions``, which reach it as
``ModelRequest.options``:

- ``delayMs``: sleep before answering (cancellable; cancellation after dispatch is how a
  workflow exercises an ``uncertain`` model effect).
- ``failFirst``: a call counter is incremented on every call that got past the delay;
  while it is <= N the call fails with a retryable HTTP 503 "scripted transient failure",
  request id ``fake-<n>``.
- ``toolInput``: when the request offers tools and no tool result is in the conversation
  yet, answer with one tool call ``fake-call-1`` to the first offered tool.
- ``finalText``: the answer; without it ``fake: `` + the most recent user text.

As upstream (docs/fake-provider.md): the counter belongs to the provider *instance*, and
there is one instance per ``spec.providers`` entry for the whole CLI process, so every
agent and task using the entry shares it (a retried task sees the counter where the
previous attempt left it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentctl.providers.base import ModelRequest, ModelResponse, ProviderCallError, ToolCall, Usage
from agentctl.spec.capabilities import FAKE_CAPABILITIES

__all__ = ["FAKE_CAPABILITIES", "FAKE_OPTION_KEYS", "FAKE_TOOL_CALL_ID", "FakeProvider", "Sleep"]

Sleep = Callable[[float], Awaitable[None]]

FAKE_OPTION_KEYS = frozenset({"toolInput", "finalText", "delayMs", "failFirst"})
FAKE_TOOL_CALL_ID = "fake-call-1"


class FakeProvider:
    """One ``kind: fake`` provider entry; ``sleep`` is injectable so tests never wait."""

    kind = "fake"
    capabilities = FAKE_CAPABILITIES

    def __init__(self, name: str, *, sleep: Sleep = asyncio.sleep) -> None:
        self.name = name
        self._sleep = sleep
        self._calls = 0

    @property
    def calls(self) -> int:
        """How many calls got past the delay (the ``failFirst`` counter)."""
        return self._calls

    async def complete(self, request: ModelRequest) -> ModelResponse:
        options = _FakeOptions.parse(request.options)
        if options.delay_ms > 0:
            await self._sleep(options.delay_ms / 1000)
        self._calls += 1
        call = self._calls
        request_id = f"fake-{call}"
        if call <= options.fail_first:
            raise ProviderCallError(
                "scripted transient failure",
                retryable=True,
                applied="not_applied",
                status=503,
                request_id=request_id,
                code="provider.unavailable",
            )
        usage = Usage(input_tokens=1, output_tokens=1)
        raw = {"provider": "fake", "call": call}
        if options.tool_input is not None and request.tools and not _has_tool_result(request):
            tool_call = ToolCall(
                id=FAKE_TOOL_CALL_ID, name=request.tools[0].name, input=options.tool_input
            )
            return ModelResponse(
                text=None,
                tool_calls=(tool_call,),
                finish_reason="tool_calls",
                usage=usage,
                response_id=request_id,
                raw=raw,
            )
        text = options.final_text
        if text is None:
            text = "fake: " + _latest_user_text(request)
        return ModelResponse(
            text=text,
            tool_calls=(),
            finish_reason="complete",
            usage=usage,
            response_id=request_id,
            raw=raw,
        )


class _FakeOptions:
    """The four options, type-checked again at run time (the compiler checked them once)."""

    __slots__ = ("delay_ms", "fail_first", "final_text", "tool_input")

    def __init__(
        self,
        delay_ms: int,
        fail_first: int,
        final_text: str | None,
        tool_input: Mapping[str, Any] | None,
    ) -> None:
        self.delay_ms = delay_ms
        self.fail_first = fail_first
        self.final_text = final_text
        self.tool_input = tool_input

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> _FakeOptions:
        unknown = sorted(set(options) - FAKE_OPTION_KEYS)
        if unknown:
            raise _bad_option(f"unknown option `{unknown[0]}`")
        final_text = options.get("finalText")
        if final_text is not None and not isinstance(final_text, str):
            raise _bad_option("`finalText` must be a string")
        tool_input = options.get("toolInput")
        if tool_input is not None and not isinstance(tool_input, Mapping):
            raise _bad_option("`toolInput` must be an object")
        return cls(
            delay_ms=_non_negative_int(options, "delayMs"),
            fail_first=_non_negative_int(options, "failFirst"),
            final_text=final_text,
            tool_input=tool_input,
        )


def _non_negative_int(options: Mapping[str, Any], key: str) -> int:
    value = options.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad_option(f"`{key}` must be a non-negative integer")
    return value


def _bad_option(detail: str) -> ProviderCallError:
    return ProviderCallError(
        f"fake provider: invalid providerOptions: {detail}",
        retryable=False,
        applied="not_applied",
        code="provider.invalid_request",
        hint="fake providerOptions are toolInput, finalText, delayMs and failFirst "
        "(docs/fake-provider.md)",
    )


def _has_tool_result(request: ModelRequest) -> bool:
    return any(message.role == "tool" for message in request.messages)


def _latest_user_text(request: ModelRequest) -> str:
    # Tool-result turns carry no text, so after a tool call this is still the prompt.
    for message in reversed(request.messages):
        if message.role == "user" and message.text is not None:
            return message.text
    return ""
