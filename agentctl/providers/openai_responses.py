"""The OpenAI Responses API (``POST /v1/responses``) for ``openai`` and ``azure_openai``.

Request mapping:

- ``instructions`` -> ``instructions``; each message -> input items: user text, assistant
  text, ``function_call`` items for the assistant's tool calls, ``function_call_output``
  items for tool results; an assistant turn's ``provider_items`` (reasoning items) are
  sent back before it.
- tools -> ``function`` tools; ``structured_output`` -> ``text.format`` ``json_schema``.
  Both are ``strict`` when the schema already satisfies strict mode (see
  ``wire.strict_compatible``), never rewritten.
- ``providerOptions``: ``store``, ``parallelToolCalls`` -> ``parallel_tool_calls``,
  ``safetyIdentifier`` -> ``safety_identifier``, ``promptCacheMode: explicit`` ->
  ``prompt_cache_key``. ``promptCacheTtl`` (only ``30m``) is accepted and not sent: the
  API's own retention already covers it.
- Continuation: with ``store: true`` (and ``reasoningContext`` other than
  ``current_turn``) a request whose conversation holds an assistant turn with a
  ``response_id`` sends ``previous_response_id`` and only the items after that turn. With
  ``store: false`` and reasoning, ``reasoning.encrypted_content`` is requested so the
  reasoning items can travel in ``provider_items`` instead.
- ``reasoning`` -> ``reasoning.effort`` (``max`` becomes ``xhigh``), ``mode`` ->
  ``reasoning.summary``.
- ``stream`` -> SSE; the final ``response.completed`` / ``response.incomplete`` event
  carries the same response object as a non-streamed call.
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
    reasoning_summary,
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
from agentctl.spec.capabilities import OPENAI_CAPABILITIES

__all__ = ["DEFAULT_RESPONSES_URL", "OpenAIResponsesProvider"]

DEFAULT_RESPONSES_URL = "https://api.openai.com/v1/responses"

_FINAL_EVENTS = ("response.completed", "response.incomplete")


class OpenAIResponsesProvider:
    """One ``openai`` (or ``azure_openai``) provider entry speaking the Responses API."""

    api = "responses"
    capabilities = OPENAI_CAPABILITIES

    def __init__(self, endpoint: ResolvedEndpoint, *, on_text_delta: TextSink | None = None):
        self.name = endpoint.name
        self.kind = endpoint.kind
        self.endpoint = endpoint
        self._on_text_delta = on_text_delta

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = build_responses_body(request)
        target = self.endpoint.target
        if not request.stream:
            data = await post_json(self.name, target, body, timeout=request.timeout_seconds)
            return parse_responses_body(self.name, data)
        stream = _ResponsesStream(self.name, self._on_text_delta)
        document = await post_sse(
            self.name, target, body, timeout=request.timeout_seconds, on_event=stream.feed
        )
        if document is not None:
            return parse_responses_body(self.name, document)
        if stream.final is None:
            raise stream_cut_short(self.name)
        return parse_responses_body(self.name, stream.final)


def build_responses_body(request: ModelRequest) -> dict[str, Any]:
    """The Responses API request body for ``request``."""
    options = checked_options(request)
    store = options.get("store")
    context = options.get("reasoningContext")
    messages: tuple[Message, ...] = request.messages
    body: dict[str, Any] = {"model": request.model}
    if request.instructions:
        body["instructions"] = request.instructions
    if store is True and context != "current_turn":
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.role == "assistant" and message.response_id is not None:
                body["previous_response_id"] = message.response_id
                messages = messages[index + 1 :]
                break
    body["input"] = _input_items(messages, with_reasoning=context != "current_turn")
    body["max_output_tokens"] = request.max_output_tokens
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.input_schema),
                "strict": strict_compatible(tool.input_schema),
            }
            for tool in request.tools
        ]
    if "parallelToolCalls" in options:
        body["parallel_tool_calls"] = options["parallelToolCalls"]
    if request.structured_output is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": "output",
                "schema": dict(request.structured_output),
                "strict": strict_compatible(request.structured_output),
            }
        }
    effort = reasoning_effort(request)
    if effort is not None:
        reasoning: dict[str, Any] = {"effort": effort}
        summary = reasoning_summary(request)
        if summary is not None:
            reasoning["summary"] = summary
        body["reasoning"] = reasoning
        if store is False and context != "current_turn":
            body["include"] = ["reasoning.encrypted_content"]
    if store is not None:
        body["store"] = store
    if "safetyIdentifier" in options:
        body["safety_identifier"] = options["safetyIdentifier"]
    cache_key = prompt_cache_key(request)
    if cache_key is not None:
        body["prompt_cache_key"] = cache_key
    if request.stream:
        body["stream"] = True
    return body


def _input_items(messages: tuple[Message, ...], *, with_reasoning: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "user":
            items.append({"role": "user", "content": user_text(message)})
        elif message.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id or "",
                    "output": tool_result_text(message),
                }
            )
        else:
            if with_reasoning:
                items.extend(dict(item) for item in message.provider_items)
            if message.text:
                items.append({"role": "assistant", "content": message.text})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": json.dumps(dict(call.input), separators=(",", ":")),
                }
                for call in message.tool_calls
            )
    return items


def parse_responses_body(provider: str, data: Any) -> ModelResponse:
    """A Responses API response object -> ``ModelResponse``; every field checked."""
    body = object_at(provider, data, "(body)")
    response_id = str_field(provider, body, "id", "")
    status = optional_str(provider, body, "status", "")
    if status == "failed":
        error = body.get("error")
        detail = error.get("message") if isinstance(error, Mapping) else None
        raise ProviderCallError(
            f"provider `{provider}`: response {response_id} failed: {detail or 'no detail'}",
            retryable=False,
            applied="applied",
            request_id=response_id,
            code="provider.response_failed",
        )
    texts: list[str] = []
    refusal: str | None = None
    calls: list[ToolCall] = []
    items: list[Mapping[str, Any]] = []
    for index, raw_item in enumerate(list_field(provider, body, "output", "")):
        path = f"output[{index}]"
        item = object_at(provider, raw_item, path)
        kind = str_field(provider, item, "type", path)
        if kind == "message":
            for part_index, raw_part in enumerate(list_field(provider, item, "content", path)):
                part_path = f"{path}.content[{part_index}]"
                part = object_at(provider, raw_part, part_path)
                part_type = str_field(provider, part, "type", part_path)
                if part_type == "output_text":
                    texts.append(str_field(provider, part, "text", part_path))
                elif part_type == "refusal":
                    refusal = str_field(provider, part, "refusal", part_path)
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    id=str_field(provider, item, "call_id", path),
                    name=str_field(provider, item, "name", path),
                    input=parse_arguments(provider, item.get("arguments"), f"{path}.arguments"),
                )
            )
        elif kind == "reasoning":
            items.append(dict(item))
    return ModelResponse(
        text=refusal if refusal is not None and not texts else ("".join(texts) or None),
        tool_calls=tuple(calls),
        finish_reason=_finish_reason(provider, body, status, refusal, calls),
        usage=_usage(provider, body.get("usage")),
        response_id=response_id,
        raw={
            "provider": "openai",
            "api": "responses",
            "id": response_id,
            "model": body.get("model") if isinstance(body.get("model"), str) else None,
            "status": status,
        },
        provider_items=tuple(items),
    )


def _finish_reason(
    provider: str,
    body: Mapping[str, Any],
    status: str | None,
    refusal: str | None,
    calls: list[ToolCall],
) -> FinishReason:
    if status == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        return "refusal" if reason == "content_filter" else "max_tokens"
    if refusal is not None and not calls:
        return "refusal"
    if calls:
        return "tool_calls"
    if status not in (None, "completed"):
        raise invalid_response(provider, "status", f"has unexpected value {status!r}")
    return "complete"


def _usage(provider: str, raw: Any) -> Usage:
    if raw is None:
        return Usage()
    usage = object_at(provider, raw, "usage")
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    return Usage(
        input_tokens=int_field(provider, usage, "input_tokens", "usage"),
        output_tokens=int_field(provider, usage, "output_tokens", "usage"),
        reasoning_tokens=int_field(
            provider,
            output_details if isinstance(output_details, Mapping) else None,
            "reasoning_tokens",
            "usage.output_tokens_details",
        ),
        cache_read_tokens=int_field(
            provider,
            input_details if isinstance(input_details, Mapping) else None,
            "cached_tokens",
            "usage.input_tokens_details",
        ),
    )


class _ResponsesStream:
    """Collects a Responses SSE stream; the final event holds the whole response."""

    def __init__(self, provider: str, on_text_delta: TextSink | None) -> None:
        self.provider = provider
        self.final: Any = None
        self._on_text_delta = on_text_delta

    def feed(self, event: SseEvent) -> None:
        if event.data == "[DONE]":
            return
        try:
            data = json.loads(event.data)
        except ValueError as exc:
            raise invalid_response(self.provider, "(stream event)", f"is not JSON: {exc}") from exc
        payload = object_at(self.provider, data, "(stream event)")
        kind = str_field(self.provider, payload, "type", "(stream event)")
        if kind == "response.output_text.delta":
            delta = str_field(self.provider, payload, "delta", kind)
            if self._on_text_delta is not None:
                self._on_text_delta(delta)
        elif kind in _FINAL_EVENTS or kind == "response.failed":
            self.final = object_at(self.provider, payload.get("response"), f"{kind}.response")
        elif kind == "error":
            message = payload.get("message")
            raise ProviderCallError(
                f"provider `{self.provider}` reported a stream error: {message or 'no detail'}",
                retryable=False,
                applied="applied",
                code="provider.stream_error",
            )
