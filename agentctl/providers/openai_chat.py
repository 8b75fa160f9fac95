"""OpenAI Chat Completions (``POST …/chat/completions``) for compatible local servers.

Ollama, vLLM, llama.cpp's server and LM Studio speak this format. A ``kind: openai`` entry
uses it when its ``endpoint`` path ends with ``/chat/completions`` (the provider model has
no field to pick an API, so the URL is the switch; see ``agentctl.providers.openai``).

Request mapping: instructions -> a leading ``system`` message; assistant tool calls ->
``tool_calls``; tool results -> ``tool`` messages; tools -> ``function`` tools;
``structured_output`` -> ``response_format`` ``json_schema``; ``max_output_tokens`` ->
``max_tokens`` (the name every compatible server accepts); ``reasoning.effort`` ->
``reasoning_effort``; ``parallelToolCalls``, ``safetyIdentifier``, ``store`` and
``promptCacheMode: explicit`` map to their Chat fields. There is no server-side
continuation here: the whole conversation is sent every turn.

Answers are read leniently where servers differ (missing ``usage`` or ``id``, tool-call
arguments as an object instead of a JSON string, ``finish_reason: stop`` next to tool
calls) and strictly where it matters (choices, message, tool-call names and ids).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentctl.providers.base import (
    FinishReason,
    Message,
    ModelRequest,
    ModelResponse,
    ProviderCallError,
    ToolCall,
    Usage,
)
from agentctl.providers.endpoint import ResolvedEndpoint
from agentctl.providers.http import (
    SseEvent,
    TextSink,
    post_json,
    post_sse,
    stream_cut_short,
)
from agentctl.providers.openai_options import (
    checked_options,
    prompt_cache_key,
    reasoning_effort,
)
from agentctl.providers.wire import (
    int_field,
    invalid_response,
    list_field,
    object_at,
    optional_str,
    parse_arguments,
    str_field,
    strict_compatible,
    tool_result_text,
    user_text,
)
from agentctl.spec.capabilities import CHAT_CAPABILITIES

__all__ = ["CHAT_CAPABILITIES", "OpenAIChatProvider"]

_FINISH: Mapping[str, FinishReason] = {
    "stop": "complete",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIChatProvider:
    """One ``openai`` provider entry whose endpoint is a Chat Completions URL."""

    api = "chat"
    capabilities = CHAT_CAPABILITIES

    def __init__(self, endpoint: ResolvedEndpoint, *, on_text_delta: TextSink | None = None):
        self.name = endpoint.name
        self.kind = endpoint.kind
        self.endpoint = endpoint
        self._on_text_delta = on_text_delta

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = build_chat_body(request)
        target = self.endpoint.target
        if not request.stream:
            data = await post_json(self.name, target, body, timeout=request.timeout_seconds)
            return parse_chat_body(self.name, data)
        stream = _ChatStream(self.name, self._on_text_delta)
        document = await post_sse(
            self.name, target, body, timeout=request.timeout_seconds, on_event=stream.feed
        )
        return parse_chat_body(self.name, stream.assembled() if document is None else document)


def build_chat_body(request: ModelRequest) -> dict[str, Any]:
    """The Chat Completions request body for ``request``."""
    options = checked_options(request)
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    messages.extend(_chat_message(message) for message in request.messages)
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_output_tokens,
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.input_schema),
                    "strict": strict_compatible(tool.input_schema),
                },
            }
            for tool in request.tools
        ]
        if "parallelToolCalls" in options:
            body["parallel_tool_calls"] = options["parallelToolCalls"]
    if request.structured_output is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "output",
                "schema": dict(request.structured_output),
                "strict": strict_compatible(request.structured_output),
            },
        }
    effort = reasoning_effort(request)
    if effort is not None:
        body["reasoning_effort"] = effort
    if "store" in options:
        body["store"] = options["store"]
    if "safetyIdentifier" in options:
        body["safety_identifier"] = options["safetyIdentifier"]
    cache_key = prompt_cache_key(request)
    if cache_key is not None:
        body["prompt_cache_key"] = cache_key
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _chat_message(message: Message) -> dict[str, Any]:
    if message.role == "user":
        return {"role": "user", "content": user_text(message)}
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": tool_result_text(message),
        }
    out: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(dict(call.input), separators=(",", ":")),
                },
            }
            for call in message.tool_calls
        ]
    return out


def parse_chat_body(provider: str, data: Any) -> ModelResponse:
    """A Chat Completions response -> ``ModelResponse``; every used field checked."""
    body = object_at(provider, data, "(body)")
    choices = list_field(provider, body, "choices", "")
    if not choices:
        raise invalid_response(provider, "choices", "is empty")
    choice = object_at(provider, choices[0], "choices[0]")
    message = object_at(provider, choice.get("message"), "choices[0].message")
    text = optional_str(provider, message, "content", "choices[0].message")
    refusal = optional_str(provider, message, "refusal", "choices[0].message")
    calls: list[ToolCall] = []
    raw_calls = list_field(provider, message, "tool_calls", "choices[0].message", required=False)
    for index, raw_call in enumerate(raw_calls):
        path = f"choices[0].message.tool_calls[{index}]"
        call = object_at(provider, raw_call, path)
        function = object_at(provider, call.get("function"), f"{path}.function")
        calls.append(
            ToolCall(
                id=str_field(provider, call, "id", path),
                name=str_field(provider, function, "name", f"{path}.function"),
                input=parse_arguments(
                    provider, function.get("arguments"), f"{path}.function.arguments"
                ),
            )
        )
    reason = optional_str(provider, choice, "finish_reason", "choices[0]")
    finish: FinishReason
    if calls:
        finish = "tool_calls"
    elif refusal is not None:
        finish, text = "refusal", text or refusal
    elif reason is None or reason in _FINISH:
        finish = _FINISH.get(reason or "stop", "complete")
    else:
        raise invalid_response(provider, "choices[0].finish_reason", f"is unknown: {reason!r}")
    response_id = optional_str(provider, body, "id", "")
    return ModelResponse(
        text=text if text else None,
        tool_calls=tuple(calls),
        finish_reason=finish,
        usage=_usage(provider, body.get("usage")),
        response_id=response_id,
        raw={
            "provider": "openai",
            "api": "chat",
            "id": response_id,
            "model": body.get("model") if isinstance(body.get("model"), str) else None,
            "finishReason": reason,
        },
    )


def _usage(provider: str, raw: Any) -> Usage:
    if raw is None:
        return Usage()
    usage = object_at(provider, raw, "usage")
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    return Usage(
        input_tokens=int_field(provider, usage, "prompt_tokens", "usage"),
        output_tokens=int_field(provider, usage, "completion_tokens", "usage"),
        reasoning_tokens=int_field(
            provider,
            completion if isinstance(completion, Mapping) else None,
            "reasoning_tokens",
            "usage.completion_tokens_details",
        ),
        cache_read_tokens=int_field(
            provider,
            prompt if isinstance(prompt, Mapping) else None,
            "cached_tokens",
            "usage.prompt_tokens_details",
        ),
    )


class _ChatStream:
    """Folds ``chat.completion.chunk`` deltas back into one non-streamed response body."""

    def __init__(self, provider: str, on_text_delta: TextSink | None) -> None:
        self.provider = provider
        self._on_text_delta = on_text_delta
        self._done = False
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: Any = None

    def feed(self, event: SseEvent) -> None:
        if event.data.strip() == "[DONE]":
            self._done = True
            return
        try:
            data = json.loads(event.data)
        except ValueError as exc:
            raise invalid_response(self.provider, "(stream chunk)", f"is not JSON: {exc}") from exc
        chunk = object_at(self.provider, data, "(stream chunk)")
        if isinstance(chunk.get("error"), Mapping):
            raise ProviderCallError(
                f"provider `{self.provider}` reported a stream error: "
                f"{chunk['error'].get('message') or 'no detail'}",
                retryable=False,
                applied="applied",
                code="provider.stream_error",
            )
        self._id = self._id or optional_str(self.provider, chunk, "id", "(stream chunk)")
        self._model = self._model or optional_str(self.provider, chunk, "model", "(stream chunk)")
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        for raw_choice in list_field(self.provider, chunk, "choices", "(stream chunk)"):
            choice = object_at(self.provider, raw_choice, "(stream chunk).choices[0]")
            self._finish = choice.get("finish_reason") or self._finish
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                self._delta(delta)

    def _delta(self, delta: Mapping[str, Any]) -> None:
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            if self._on_text_delta is not None:
                self._on_text_delta(content)
        if isinstance(delta.get("refusal"), str):
            self._refusal.append(delta["refusal"])
        for raw_call in delta.get("tool_calls") or []:
            call = object_at(self.provider, raw_call, "(stream chunk).delta.tool_calls[]")
            index = call.get("index", len(self._calls))
            slot = self._calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = call.get("id") or slot["id"]
            function = call.get("function")
            if isinstance(function, Mapping):
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""

    def assembled(self) -> dict[str, Any]:
        """The equivalent non-streamed body; a stream without ``[DONE]`` was cut short."""
        if not self._done:
            raise stream_cut_short(self.provider)
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": slot["id"],
                    "type": "function",
                    "function": {"name": slot["name"], "arguments": slot["arguments"]},
                }
                for _, slot in sorted(self._calls.items())
            ]
        return {
            "id": self._id,
            "model": self._model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
            "usage": self._usage,
        }
