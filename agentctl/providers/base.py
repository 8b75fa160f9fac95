"""The provider interface: one model request in, one model response out.

Requests and responses are plain frozen values with a JSON form because both are journaled:
``ModelRequest.to_json()`` is the effect input of a model request (its digest is part of
the effect id, docs/durable-execution.md) and ``ModelResponse.to_json()`` is the effect result that
a resume
reuses instead of calling the provider again. Nothing here touches the database.

They are typed records (:mod:`agentctl.typed_records`): JSON forms use camelCase keys in
field order and always carry every key, so the same request always serializes to the same
bytes. The exception is keys added after the first journal format (``reasoning``,
``stream``, ``responseId`` of a message, ``providerItems``): they are written only when
they differ from their default, so requests that do not use them keep the bytes, digests
and effect ids they always had. A stored record that does not fit raises ``ProviderError``
(``provider.invalid_response``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal, Protocol

from pydantic import StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from agentctl.error_codes import ErrorCode
from agentctl.errors import AgentctlError, ProviderError
from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

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


class _ProviderRecord(CamelRecord):
    @classmethod
    def invalid(cls, detail: str) -> AgentctlError:
        return ProviderError(
            f"invalid {cls.record_name}: {detail}", code="provider.invalid_response"
        )


@dataclass(frozen=True, config=CAMEL)
class ToolSpec(_ProviderRecord):
    """A tool the model may call, as the provider sees it."""

    record_name = "tool"

    name: StrictStr
    description: StrictStr
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, config=CAMEL)
class ToolCall(_ProviderRecord):
    """One function call the model asked for; ``id`` pairs it with its result message."""

    record_name = "tool call"

    id: StrictStr
    name: StrictStr
    input: Mapping[str, Any]


@dataclass(frozen=True, config=CAMEL)
class Message(_ProviderRecord):
    """One conversation turn: user text, assistant text/tool calls, or one tool result."""

    record_name = "message"

    role: Role
    text: StrictStr | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: StrictStr | None = None
    tool_result: Any = None
    response_id: StrictStr | None = omitted_when(None)
    """For an assistant turn: the provider's id of the response it came from (continuation)."""
    provider_items: tuple[Mapping[str, Any], ...] = omitted_when(())
    """For an assistant turn: opaque provider items (reasoning) that must be sent back."""


@dataclass(frozen=True, config=CAMEL)
class ModelRequest(_ProviderRecord):
    """Everything one provider call depends on; also the model effect's input.

    Its JSON form is the full provider request (docs/durable-execution.md)."""

    record_name = "model request"

    provider: StrictStr
    model: StrictStr
    instructions: StrictStr
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_output_tokens: StrictInt
    structured_output: Mapping[str, Any] | None
    options: Mapping[str, Any]
    timeout_seconds: StrictInt | StrictFloat
    reasoning: Mapping[str, Any] | None = omitted_when(None)
    """The agent's ``reasoning`` object (``{effort, mode?}``), or None."""
    stream: StrictBool = omitted_when(False)
    """The agent's ``stream`` flag: ask the provider for a server-sent event stream."""


@dataclass(frozen=True, config=CAMEL)
class Usage(_ProviderRecord):
    """Token counts of one response, or summed over turns with ``+``."""

    record_name = "usage"

    input_tokens: StrictInt = 0
    output_tokens: StrictInt = 0
    reasoning_tokens: StrictInt = 0
    cache_read_tokens: StrictInt = 0
    cache_write_tokens: StrictInt = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, config=CAMEL)
class ModelResponse(_ProviderRecord):
    """One provider answer; its JSON form is stored as the model effect's result."""

    record_name = "model response"

    text: StrictStr | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage
    response_id: StrictStr | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    provider_items: tuple[Mapping[str, Any], ...] = omitted_when(())
    """Opaque items (reasoning) to copy into the assistant ``Message`` of the next turn."""


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

    default_code = ErrorCode.PROVIDER_CALL_FAILED

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
