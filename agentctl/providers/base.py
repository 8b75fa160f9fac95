"""The provider interface: one model request in, one model response out.

Requests and responses are plain frozen values with a JSON form because both are journaled:
``ModelRequest.to_json()`` is the effect input of a model request (its digest is part of
the effect id, docs/durable-execution.md) and ``ModelResponse.to_json()`` is the effect result that
a resume
reuses instead of calling the provider again. Nothing here touches the database.

JSON forms use camelCase keys in a fixed order and always carry every key, so the same
request always serializes to the same bytes. The exception is keys added after the first
journal format (``reasoning``, ``stream``, ``responseId``, ``providerItems``): they are
written only when they differ from their default, so requests that do not use them keep
the bytes, digests and effect ids they always had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from agentctl.errors import ProviderError

__all__ = [
    "Applied",
    "FinishReason",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderCallError",
    "Role",
    "ToolCall",
    "ToolSpec",
    "Usage",
]

Role = Literal["user", "assistant", "tool"]
FinishReason = Literal["complete", "tool_calls", "max_tokens", "refusal"]
Applied = Literal["not_applied", "uncertain", "applied"]

_ROLES: tuple[Role, ...] = ("user", "assistant", "tool")
_FINISH_REASONS: tuple[FinishReason, ...] = ("complete", "tool_calls", "max_tokens", "refusal")


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call, as the provider sees it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
        }

    @classmethod
    def from_json(cls, data: Any) -> ToolSpec:
        obj = _object(data, "tool")
        return cls(
            name=_string(obj, "name", "tool"),
            description=_string(obj, "description", "tool"),
            input_schema=_mapping(obj, "inputSchema", "tool"),
        )


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for; ``id`` pairs it with its result message."""

    id: str
    name: str
    input: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "input": dict(self.input)}

    @classmethod
    def from_json(cls, data: Any) -> ToolCall:
        obj = _object(data, "tool call")
        return cls(
            id=_string(obj, "id", "tool call"),
            name=_string(obj, "name", "tool call"),
            input=_mapping(obj, "input", "tool call"),
        )


@dataclass(frozen=True)
class Message:
    """One conversation turn: user text, assistant text/tool calls, or one tool result."""

    role: Role
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_result: Any = None
    response_id: str | None = None
    """For an assistant turn: the provider's id of the response it came from (continuation)."""
    provider_items: tuple[Mapping[str, Any], ...] = ()
    """For an assistant turn: opaque provider items (reasoning) that must be sent back."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "role": self.role,
            "text": self.text,
            "toolCalls": [call.to_json() for call in self.tool_calls],
            "toolCallId": self.tool_call_id,
            "toolResult": self.tool_result,
        }
        if self.response_id is not None:
            data["responseId"] = self.response_id
        if self.provider_items:
            data["providerItems"] = [dict(item) for item in self.provider_items]
        return data

    @classmethod
    def from_json(cls, data: Any) -> Message:
        obj = _object(data, "message")
        role = obj.get("role")
        if role not in _ROLES:
            raise _invalid("message", f"role {role!r} is not one of {list(_ROLES)}")
        return cls(
            role=cast(Role, role),
            text=_optional_string(obj, "text", "message"),
            tool_calls=tuple(ToolCall.from_json(c) for c in _list(obj, "toolCalls", "message")),
            tool_call_id=_optional_string(obj, "toolCallId", "message"),
            tool_result=obj.get("toolResult"),
            response_id=_optional_string(obj, "responseId", "message"),
            provider_items=_objects(obj, "providerItems", "message"),
        )


@dataclass(frozen=True)
class ModelRequest:
    """Everything one provider call depends on; also the model effect's input."""

    provider: str
    model: str
    instructions: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_output_tokens: int
    structured_output: Mapping[str, Any] | None
    options: Mapping[str, Any]
    timeout_seconds: float
    reasoning: Mapping[str, Any] | None = None
    """The agent's ``reasoning`` object (``{effort, mode?}``), or None."""
    stream: bool = False
    """The agent's ``stream`` flag: ask the provider for a server-sent event stream."""

    def to_json(self) -> dict[str, Any]:
        """The full provider request (docs/durable-execution.md), stable key order, every key
        present."""
        data: dict[str, Any] = {
            "provider": self.provider,
            "model": self.model,
            "instructions": self.instructions,
            "messages": [message.to_json() for message in self.messages],
            "tools": [tool.to_json() for tool in self.tools],
            "maxOutputTokens": self.max_output_tokens,
            "structuredOutput": (
                None if self.structured_output is None else dict(self.structured_output)
            ),
            "options": dict(self.options),
            "timeoutSeconds": self.timeout_seconds,
        }
        if self.reasoning is not None:
            data["reasoning"] = dict(self.reasoning)
        if self.stream:
            data["stream"] = True
        return data

    @classmethod
    def from_json(cls, data: Any) -> ModelRequest:
        obj = _object(data, "model request")
        where = "model request"
        structured = obj.get("structuredOutput")
        if structured is not None and not isinstance(structured, Mapping):
            raise _invalid(where, "`structuredOutput` must be an object or null")
        timeout = obj.get("timeoutSeconds")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise _invalid(where, "`timeoutSeconds` must be a number")
        reasoning = obj.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, Mapping):
            raise _invalid(where, "`reasoning` must be an object or null")
        stream = obj.get("stream", False)
        if not isinstance(stream, bool):
            raise _invalid(where, "`stream` must be a boolean")
        return cls(
            provider=_string(obj, "provider", where),
            model=_string(obj, "model", where),
            instructions=_string(obj, "instructions", where),
            messages=tuple(Message.from_json(m) for m in _list(obj, "messages", where)),
            tools=tuple(ToolSpec.from_json(t) for t in _list(obj, "tools", where)),
            max_output_tokens=_int(obj, "maxOutputTokens", where),
            structured_output=structured,
            options=_mapping(obj, "options", where),
            timeout_seconds=timeout,
            reasoning=reasoning,
            stream=stream,
        )


@dataclass(frozen=True)
class Usage:
    """Token counts of one response, or summed over turns with ``+``."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "reasoningTokens": self.reasoning_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "cacheWriteTokens": self.cache_write_tokens,
        }

    @classmethod
    def from_json(cls, data: Any) -> Usage:
        obj = _object(data, "usage")
        return cls(
            input_tokens=_int(obj, "inputTokens", "usage", default=0),
            output_tokens=_int(obj, "outputTokens", "usage", default=0),
            reasoning_tokens=_int(obj, "reasoningTokens", "usage", default=0),
            cache_read_tokens=_int(obj, "cacheReadTokens", "usage", default=0),
            cache_write_tokens=_int(obj, "cacheWriteTokens", "usage", default=0),
        )


@dataclass(frozen=True)
class ModelResponse:
    """One provider answer; ``to_json`` is stored as the model effect's result."""

    text: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage
    response_id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    provider_items: tuple[Mapping[str, Any], ...] = ()
    """Opaque items (reasoning) to copy into the assistant ``Message`` of the next turn."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "toolCalls": [call.to_json() for call in self.tool_calls],
            "finishReason": self.finish_reason,
            "usage": self.usage.to_json(),
            "responseId": self.response_id,
            "raw": dict(self.raw),
        }
        if self.provider_items:
            data["providerItems"] = [dict(item) for item in self.provider_items]
        return data

    @classmethod
    def from_json(cls, data: Any) -> ModelResponse:
        """Rebuild a stored response; ``ProviderError`` (``provider.invalid_response``)."""
        where = "model response"
        obj = _object(data, where)
        finish = obj.get("finishReason")
        if finish not in _FINISH_REASONS:
            raise _invalid(where, f"finishReason {finish!r} is not one of {list(_FINISH_REASONS)}")
        raw = obj.get("raw", {})
        if not isinstance(raw, Mapping):
            raise _invalid(where, "`raw` must be an object")
        return cls(
            text=_optional_string(obj, "text", where),
            tool_calls=tuple(ToolCall.from_json(c) for c in _list(obj, "toolCalls", where)),
            finish_reason=cast(FinishReason, finish),
            usage=Usage.from_json(obj.get("usage", {})),
            response_id=_optional_string(obj, "responseId", where),
            raw=raw,
            provider_items=_objects(obj, "providerItems", where),
        )


class Provider(Protocol):
    """A configured provider entry (one instance per ``spec.providers`` key)."""

    name: str
    kind: str
    capabilities: frozenset[str]

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request; failures raise ``ProviderCallError``."""
        ...


class ProviderCallError(ProviderError):
    """A provider call failed; says whether to retry and whether it may have taken effect.

    ``applied`` drives the model effect's status: ``not_applied`` (refused before any
    work: HTTP 429/5xx, connection refused, bad request) lets the effect be marked
    ``failed``; ``uncertain`` (timeout or connection loss after the request was sent)
    marks it ``uncertain`` so a resume refuses to pass it until an operator reconciles it.
    ``applied`` means the provider answered but the answer is unusable (malformed), so the
    call is known to have happened and must not be repeated blindly.

    ``retry_after_seconds`` is the server's ``Retry-After`` (or ``retry-after-ms``) hint,
    when it sent one, for a retry policy that wants to honour it.
    """

    default_code = "provider.call_failed"

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        applied: Applied,
        status: int | None = None,
        request_id: str | None = None,
        code: str | None = None,
        hint: str | None = None,
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(message, code=code, hint=hint)
        self.retryable = retryable
        self.applied: Applied = applied
        self.status = status
        self.request_id = request_id
        self.retry_after_seconds = retry_after_seconds


def _invalid(where: str, detail: str) -> ProviderError:
    return ProviderError(f"invalid {where}: {detail}", code="provider.invalid_response")


def _object(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise _invalid(where, f"expected an object, got {type(data).__name__}")
    return data


def _string(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise _invalid(where, f"`{key}` must be a string")
    return value


def _optional_string(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid(where, f"`{key}` must be a string or null")
    return value


def _int(obj: Mapping[str, Any], key: str, where: str, *, default: int | None = None) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(where, f"`{key}` must be an integer")
    return value


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise _invalid(where, f"`{key}` must be a list")
    return value


def _objects(obj: Mapping[str, Any], key: str, where: str) -> tuple[Mapping[str, Any], ...]:
    items = _list(obj, key, where)
    if not all(isinstance(item, Mapping) for item in items):
        raise _invalid(where, f"`{key}` must be a list of objects")
    return tuple(items)


def _mapping(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise _invalid(where, f"`{key}` must be an object")
    return value
