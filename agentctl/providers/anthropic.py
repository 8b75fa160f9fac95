"""The ``anthropic`` kind: the Messages API (``POST /v1/messages``).

Request mapping: instructions -> ``system``; user text -> a user ``text`` block;
assistant turns -> ``thinking`` blocks kept in ``provider_items`` (the API wants them back
unchanged next to tool use), a ``text`` block and ``tool_use`` blocks; consecutive tool
results -> one user message of ``tool_result`` blocks; tools -> ``tools`` with
``input_schema``; ``structured_output`` -> ``output_config.format`` (``json_schema``);
``max_output_tokens`` -> ``max_tokens``; ``reasoning.effort`` -> an extended-thinking
budget (below). Auth is ``x-api-key`` plus ``anthropic-version``.

Usage: Anthropic reports ``input_tokens`` *without* cache reads and writes; agentctl's
``Usage.input_tokens`` is the total prompt size with cache tokens carved out of it
(docs/budgets.md), so the three are added up.
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
from agentctl.providers.endpoint import ResolvedEndpoint, check_options, resolve_endpoint
from agentctl.providers.http import (
    SseEvent,
    TextSink,
    post_json,
    post_sse,
    stream_cut_short,
)
from agentctl.providers.wire import (
    int_field,
    invalid_response,
    list_field,
    object_at,
    optional_str,
    parse_arguments,
    str_field,
    tool_result_text,
    user_text,
)
from agentctl.spec.capabilities import ANTHROPIC_CAPABILITIES

__all__ = [
    "ANTHROPIC_CAPABILITIES",
    "ANTHROPIC_VERSION",
    "DEFAULT_MESSAGES_URL",
    "THINKING_BUDGETS",
    "AnthropicProvider",
    "build_anthropic",
]

DEFAULT_MESSAGES_URL = "https://api.anthropic.com/v1/messages"
ANTHROPIC_VERSION = "2023-06-01"
THINKING_BUDGETS: Mapping[str, int] = {
    "low": 1024,
    "medium": 4096,
    "high": 16384,
    "xhigh": 32768,
    "max": 65536,
}
"""Extended-thinking token budget per effort; capped below ``max_tokens``. ``none``: off."""

_MIN_THINKING_BUDGET = 1024
_STOP: Mapping[str, FinishReason] = {
    "end_turn": "complete",
    "stop_sequence": "complete",
    "pause_turn": "complete",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


class AnthropicProvider:
    """One ``kind: anthropic`` provider entry."""

    kind = "anthropic"
    api = "messages"
    capabilities = ANTHROPIC_CAPABILITIES

    def __init__(self, endpoint: ResolvedEndpoint, *, on_text_delta: TextSink | None = None):
        self.name = endpoint.name
        self.endpoint = endpoint
        self._on_text_delta = on_text_delta

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = build_messages_body(request)
        target = self.endpoint.target
        if not request.stream:
            data = await post_json(self.name, target, body, timeout=request.timeout_seconds)
            return parse_messages_body(self.name, data)
        stream = _MessagesStream(self.name, self._on_text_delta)
        document = await post_sse(
            self.name, target, body, timeout=request.timeout_seconds, on_event=stream.feed
        )
        return parse_messages_body(self.name, stream.assembled() if document is None else document)


def build_anthropic(
    name: str,
    definition: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    on_text_delta: TextSink | None = None,
) -> AnthropicProvider:
    endpoint = resolve_endpoint(
        name,
        definition,
        environ=environ,
        default_url=DEFAULT_MESSAGES_URL,
        auth_headers=lambda key: {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION},
    )
    return AnthropicProvider(endpoint, on_text_delta=on_text_delta)


def build_messages_body(request: ModelRequest) -> dict[str, Any]:
    """The Messages API request body for ``request`` (no providerOptions exist,
    docs/providers.md)."""
    check_options(request.provider, request.options, {})
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_output_tokens,
        "messages": _messages(request.messages),
    }
    if request.instructions:
        body["system"] = request.instructions
    if request.tools:
        body["tools"] = [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": dict(tool.input_schema),
            }
            for tool in request.tools
        ]
    if request.structured_output is not None:
        body["output_config"] = {
            "format": {"type": "json_schema", "schema": dict(request.structured_output)}
        }
    thinking = _thinking(request)
    if thinking is not None:
        body["thinking"] = thinking
    if request.stream:
        body["stream"] = True
    return body


def _thinking(request: ModelRequest) -> dict[str, Any] | None:
    if request.reasoning is None:
        return None
    effort = request.reasoning.get("effort")
    if effort == "none":
        return None
    if effort not in THINKING_BUDGETS:
        raise _bad_request(request, f"reasoning effort {effort!r} is not supported")
    budget = min(THINKING_BUDGETS[str(effort)], request.max_output_tokens - 1)
    if budget < _MIN_THINKING_BUDGET:
        raise _bad_request(
            request,
            f"reasoning needs maxOutputTokens > {_MIN_THINKING_BUDGET} "
            f"(got {request.max_output_tokens})",
        )
    return {"type": "enabled", "budget_tokens": budget}


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Messages with roles merged: the API wants user/assistant turns to alternate."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "user":
        return [{"type": "text", "text": user_text(message)}]
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": tool_result_text(message),
            }
        ]
    blocks: list[dict[str, Any]] = [dict(item) for item in message.provider_items]
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.input)}
        for call in message.tool_calls
    )
    return blocks


def parse_messages_body(provider: str, data: Any) -> ModelResponse:
    """A Messages API response -> ``ModelResponse``; every used field checked."""
    body = object_at(provider, data, "(body)")
    message_id = str_field(provider, body, "id", "")
    texts: list[str] = []
    calls: list[ToolCall] = []
    items: list[Mapping[str, Any]] = []
    for index, raw_block in enumerate(list_field(provider, body, "content", "")):
        path = f"content[{index}]"
        block = object_at(provider, raw_block, path)
        kind = str_field(provider, block, "type", path)
        if kind == "text":
            texts.append(str_field(provider, block, "text", path))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=str_field(provider, block, "id", path),
                    name=str_field(provider, block, "name", path),
                    input=parse_arguments(provider, block.get("input"), f"{path}.input"),
                )
            )
        elif kind in ("thinking", "redacted_thinking"):
            items.append(dict(block))
    stop = optional_str(provider, body, "stop_reason", "")
    if stop is not None and stop not in _STOP:
        raise invalid_response(provider, "stop_reason", f"is unknown: {stop!r}")
    finish = _STOP[stop] if stop is not None else ("tool_calls" if calls else "complete")
    if calls and finish == "complete":
        finish = "tool_calls"
    return ModelResponse(
        text="".join(texts) or None,
        tool_calls=tuple(calls),
        finish_reason=finish,
        usage=_usage(provider, body.get("usage")),
        response_id=message_id,
        raw={
            "provider": "anthropic",
            "id": message_id,
            "model": body.get("model") if isinstance(body.get("model"), str) else None,
            "stopReason": stop,
        },
        provider_items=tuple(items),
    )


def _usage(provider: str, raw: Any) -> Usage:
    if raw is None:
        return Usage()
    usage = object_at(provider, raw, "usage")
    cache_read = int_field(provider, usage, "cache_read_input_tokens", "usage")
    cache_write = int_field(provider, usage, "cache_creation_input_tokens", "usage")
    return Usage(
        input_tokens=int_field(provider, usage, "input_tokens", "usage") + cache_read + cache_write,
        output_tokens=int_field(provider, usage, "output_tokens", "usage"),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _bad_request(request: ModelRequest, detail: str) -> ProviderCallError:
    return ProviderCallError(
        f"provider `{request.provider}`: {detail}",
        retryable=False,
        applied="not_applied",
        code="provider.invalid_request",
    )


class _MessagesStream:
    """Folds a Messages SSE stream back into one non-streamed message body."""

    def __init__(self, provider: str, on_text_delta: TextSink | None) -> None:
        self.provider = provider
        self._on_text_delta = on_text_delta
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._partial_json: dict[int, list[str]] = {}
        self._stopped = False

    def feed(self, event: SseEvent) -> None:
        try:
            data = json.loads(event.data)
        except ValueError as exc:
            raise invalid_response(self.provider, "(stream event)", f"is not JSON: {exc}") from exc
        payload = object_at(self.provider, data, "(stream event)")
        kind = str_field(self.provider, payload, "type", "(stream event)")
        if kind == "message_start":
            start = object_at(self.provider, payload.get("message"), "message_start.message")
            self._message = dict(start)
        elif kind == "content_block_start":
            index = self._index(payload, kind)
            block = object_at(self.provider, payload.get("content_block"), f"{kind}.content_block")
            self._blocks[index] = dict(block)
            if block.get("type") == "tool_use":
                self._blocks[index]["input"] = {}
                self._partial_json[index] = []
        elif kind == "content_block_delta":
            self._delta(self._index(payload, kind), payload)
        elif kind == "content_block_stop":
            index = self._index(payload, kind)
            if index in self._partial_json:
                text = "".join(self._partial_json.pop(index))
                self._blocks[index]["input"] = parse_arguments(
                    self.provider, text, f"content[{index}].input"
                )
        elif kind == "message_delta":
            self._message_delta(payload)
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            error = payload.get("error")
            detail = error.get("message") if isinstance(error, Mapping) else None
            raise ProviderCallError(
                f"provider `{self.provider}` reported a stream error: {detail or 'no detail'}",
                retryable=False,
                applied="applied",
                code="provider.stream_error",
            )

    def _index(self, payload: Mapping[str, Any], kind: str) -> int:
        index = payload.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise invalid_response(self.provider, f"{kind}.index", "must be an integer")
        if kind != "content_block_start" and index not in self._blocks:
            raise invalid_response(self.provider, f"{kind}.index", f"{index} was never started")
        return index

    def _delta(self, index: int, payload: Mapping[str, Any]) -> None:
        delta = object_at(self.provider, payload.get("delta"), "content_block_delta.delta")
        block = self._blocks[index]
        kind = delta.get("type")
        if kind == "text_delta":
            text = str_field(self.provider, delta, "text", "content_block_delta.delta")
            block["text"] = block.get("text", "") + text
            if self._on_text_delta is not None:
                self._on_text_delta(text)
        elif kind == "input_json_delta":
            partial = str_field(self.provider, delta, "partial_json", "content_block_delta.delta")
            self._partial_json.setdefault(index, []).append(partial)
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature", ""))

    def _message_delta(self, payload: Mapping[str, Any]) -> None:
        if self._message is None:
            raise invalid_response(self.provider, "message_delta", "arrived before message_start")
        delta = payload.get("delta")
        if isinstance(delta, Mapping) and "stop_reason" in delta:
            self._message["stop_reason"] = delta["stop_reason"]
        usage = payload.get("usage")
        if isinstance(usage, Mapping):
            merged = dict(self._message.get("usage") or {})
            merged.update({key: value for key, value in usage.items() if value is not None})
            self._message["usage"] = merged

    def assembled(self) -> dict[str, Any]:
        """The equivalent non-streamed body; no ``message_stop`` means cut short."""
        if not self._stopped or self._message is None:
            raise stream_cut_short(self.provider)
        message = dict(self._message)
        message["content"] = [block for _, block in sorted(self._blocks.items())]
        return message
