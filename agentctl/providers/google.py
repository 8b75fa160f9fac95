"""The ``google`` kind: the Gemini API (``POST {endpoint}/{model}:generateContent``).

Request mapping: instructions -> ``systemInstruction``; user text -> a ``user`` content
with a ``text`` part; assistant turns -> a ``model`` content with a ``text`` part and
``functionCall`` parts; consecutive tool results -> one ``user`` content of
``functionResponse`` parts (``response: {output: <result>}``); tools -> one
``functionDeclarations`` tool; ``structured_output`` -> ``generationConfig``
``responseMimeType: application/json`` + ``responseSchema``; ``max_output_tokens`` ->
``generationConfig.maxOutputTokens``; ``reasoning.effort`` ->
``generationConfig.thinkingConfig.thinkingBudget`` (below). Auth is ``x-goog-api-key``.

Tool call ids: Gemini's function calls carry none, so each gets ``call-<turn>-<index>``
(``turn``: how many model turns the request already holds). The id only depends on the
request, so a resumed run that replays a journaled response sees the same ids. A tool
result is sent back under the *name* of the call its id belongs to.

Continuation: newer models attach ``thoughtSignature`` to parts and want the model turn
sent back unchanged. When a response carries one (or a ``thought`` part), all its parts are
kept in ``provider_items`` and replace the rebuilt parts of that assistant turn.

Usage: ``promptTokenCount`` already includes ``cachedContentTokenCount``; thinking tokens
(``thoughtsTokenCount``) are reported apart from ``candidatesTokenCount`` and are added to
the output total, where agentctl carves reasoning out of output (docs/budgets.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

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
from agentctl.providers.http import HttpTarget, post_json
from agentctl.providers.wire import (
    int_field,
    invalid_response,
    list_field,
    object_at,
    optional_str,
    parse_arguments,
    str_field,
    user_text,
)
from agentctl.spec.capabilities import GOOGLE_CAPABILITIES

__all__ = [
    "DEFAULT_MODELS_URL",
    "GOOGLE_CAPABILITIES",
    "THINKING_BUDGETS",
    "GoogleProvider",
    "build_generate_body",
    "build_google",
    "generate_url",
    "parse_generate_body",
    "tool_call_id",
]

DEFAULT_MODELS_URL = "https://generativelanguage.googleapis.com/v1beta/models"


THINKING_BUDGETS: Mapping[str, int] = {
    "none": 0,
    "low": 1024,
    "medium": 4096,
    "high": 16384,
    "xhigh": 24576,
    "max": 32768,
}
"""``thinkingBudget`` per effort, capped at ``maxOutputTokens``; ``none`` turns thinking off."""

_FINISH: Mapping[str, FinishReason] = {
    "STOP": "complete",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
    "IMAGE_SAFETY": "refusal",
}
# The model ran but produced nothing usable; none of agentctl's finish reasons fits.
_FAILED = frozenset(
    {
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "LANGUAGE",
        "OTHER",
        "FINISH_REASON_UNSPECIFIED",
    }
)


class GoogleProvider:
    """One ``kind: google`` provider entry.

    ``endpoint.target.url`` is the models collection URL (what ``auth check`` shows and
    the network policy checks); each call posts to ``<it>/<model>:generateContent``.
    """

    kind = "google"
    api = "generateContent"
    capabilities = GOOGLE_CAPABILITIES

    def __init__(self, endpoint: ResolvedEndpoint):
        self.name = endpoint.name
        self.endpoint = endpoint

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One unstreamed call (``streaming`` is not offered, so ``stream`` is ignored)."""
        body = build_generate_body(request)
        target: HttpTarget = dataclasses.replace(
            self.endpoint.target, url=generate_url(self.endpoint.target.url, request.model)
        )
        data = await post_json(self.name, target, body, timeout=request.timeout_seconds)
        return parse_generate_body(self.name, data, turn=_model_turns(request.messages))


def build_google(
    name: str, definition: Mapping[str, Any], *, environ: Mapping[str, str]
) -> GoogleProvider:
    """The provider for a ``kind: google`` entry (credential default ``GEMINI_API_KEY``)."""
    endpoint = resolve_endpoint(
        name,
        {**definition, "endpoint": _models_url(definition.get("endpoint") or DEFAULT_MODELS_URL)},
        environ=environ,
        default_url=DEFAULT_MODELS_URL,
        auth_headers=lambda key: {"x-goog-api-key": key},
    )
    return GoogleProvider(endpoint)


def generate_url(models_url: str, model: str) -> str:
    """``<models_url>/<model>:generateContent``; a ``models/`` prefix on the id is dropped."""
    model_id = model.removeprefix("models/")
    return f"{models_url.rstrip('/')}/{quote(model_id, safe='-._~')}:generateContent"


def tool_call_id(turn: int, index: int) -> str:
    """The synthesized id of the ``index``-th function call of model turn ``turn``."""
    return f"call-{turn}-{index}"


def build_generate_body(request: ModelRequest) -> dict[str, Any]:
    """The generateContent request body for ``request`` (no providerOptions exist,
    docs/providers.md)."""
    check_options(request.provider, request.options, {})
    body: dict[str, Any] = {"contents": _contents(request)}
    if request.instructions:
        body["systemInstruction"] = {"parts": [{"text": request.instructions}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.input_schema),
                    }
                    for tool in request.tools
                ]
            }
        ]
    config: dict[str, Any] = {"maxOutputTokens": request.max_output_tokens}
    if request.structured_output is not None:
        config["responseMimeType"] = "application/json"
        config["responseSchema"] = dict(request.structured_output)
    thinking = _thinking(request)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    body["generationConfig"] = config
    return body


def _thinking(request: ModelRequest) -> dict[str, Any] | None:
    if request.reasoning is None:
        return None
    effort = request.reasoning.get("effort")
    if effort not in THINKING_BUDGETS:
        raise _bad_request(
            request, f"reasoning effort {effort!r} is not one of {sorted(THINKING_BUDGETS)}"
        )
    return {"thinkingBudget": min(THINKING_BUDGETS[str(effort)], request.max_output_tokens)}


def _contents(request: ModelRequest) -> list[dict[str, Any]]:
    """Contents with roles merged: consecutive tool results share one ``user`` content."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in request.messages:
        role = "model" if message.role == "assistant" else "user"
        if message.role == "assistant":
            names.update((call.id, call.name) for call in message.tool_calls)
        parts = _parts(request, message, names)
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})
    return out


def _parts(
    request: ModelRequest, message: Message, names: Mapping[str, str]
) -> list[dict[str, Any]]:
    if message.role == "user":
        return [{"text": user_text(message)}]
    if message.role == "tool":
        name = names.get(message.tool_call_id or "")
        if name is None:
            raise _bad_request(
                request,
                f"tool result for call id {message.tool_call_id!r} has no matching function call",
            )
        return [{"functionResponse": {"name": name, "response": {"output": message.tool_result}}}]
    if message.provider_items:
        return [dict(item) for item in message.provider_items]
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"text": message.text})
    parts.extend(
        {"functionCall": {"name": call.name, "args": dict(call.input)}}
        for call in message.tool_calls
    )
    return parts


def _model_turns(messages: tuple[Message, ...]) -> int:
    return sum(1 for message in messages if message.role == "assistant")


def parse_generate_body(provider: str, data: Any, *, turn: int = 0) -> ModelResponse:
    """A generateContent response -> ``ModelResponse``; every used field checked.

    ``turn`` numbers the synthesized tool call ids (see ``tool_call_id``).
    """
    body = object_at(provider, data, "(body)")
    response_id = optional_str(provider, body, "responseId", "")
    model = body.get("modelVersion") if isinstance(body.get("modelVersion"), str) else None
    usage = _usage(provider, body.get("usageMetadata"))
    candidates = list_field(provider, body, "candidates", "", required=False)
    if not candidates:
        return _blocked(provider, body, usage, response_id, model)
    path = "candidates[0]"
    candidate = object_at(provider, candidates[0], path)
    finish = optional_str(provider, candidate, "finishReason", path)
    if finish is not None and finish not in _FINISH and finish not in _FAILED:
        raise invalid_response(provider, f"{path}.finishReason", f"is unknown: {finish!r}")
    if finish in _FAILED:
        raise ProviderCallError(
            f"provider `{provider}`: the model stopped with finishReason {finish}",
            retryable=False,
            applied="applied",
            request_id=response_id,
            code="provider.response_failed",
        )
    texts: list[str] = []
    calls: list[ToolCall] = []
    raw_parts: list[Mapping[str, Any]] = []
    keep_parts = False
    content = candidate.get("content")
    if content is not None:
        content_path = f"{path}.content"
        content_obj = object_at(provider, content, content_path)
        for index, raw_part in enumerate(
            list_field(provider, content_obj, "parts", content_path, required=False)
        ):
            part_path = f"{content_path}.parts[{index}]"
            part = object_at(provider, raw_part, part_path)
            raw_parts.append(dict(part))
            keep_parts = keep_parts or "thoughtSignature" in part or part.get("thought") is True
            if "functionCall" in part:
                call_path = f"{part_path}.functionCall"
                function = object_at(provider, part["functionCall"], call_path)
                calls.append(
                    ToolCall(
                        id=tool_call_id(turn, len(calls)),
                        name=str_field(provider, function, "name", call_path),
                        input=parse_arguments(
                            provider, function.get("args", {}), f"{call_path}.args"
                        ),
                    )
                )
            elif part.get("thought") is True:
                continue
            elif "text" in part:
                texts.append(str_field(provider, part, "text", part_path))
    reason: FinishReason = _FINISH[finish] if finish is not None else "complete"
    if calls and reason == "complete":
        reason = "tool_calls"
    return ModelResponse(
        text="".join(texts) or None,
        tool_calls=tuple(calls),
        finish_reason=reason,
        usage=usage,
        response_id=response_id,
        raw={"provider": "google", "id": response_id, "model": model, "finishReason": finish},
        provider_items=tuple(raw_parts) if keep_parts else (),
    )


def _blocked(
    provider: str,
    body: Mapping[str, Any],
    usage: Usage,
    response_id: str | None,
    model: str | None,
) -> ModelResponse:
    """No candidate: only a blocked prompt (``promptFeedback.blockReason``) explains that."""
    feedback = body.get("promptFeedback")
    block = None
    if feedback is not None:
        block = optional_str(
            provider,
            object_at(provider, feedback, "promptFeedback"),
            "blockReason",
            "promptFeedback",
        )
    if block is None:
        raise invalid_response(provider, "candidates", "is missing or empty")
    return ModelResponse(
        text=None,
        tool_calls=(),
        finish_reason="refusal",
        usage=usage,
        response_id=response_id,
        raw={"provider": "google", "id": response_id, "model": model, "blockReason": block},
    )


def _usage(provider: str, raw: Any) -> Usage:
    if raw is None:
        return Usage()
    usage = object_at(provider, raw, "usageMetadata")
    path = "usageMetadata"
    thoughts = int_field(provider, usage, "thoughtsTokenCount", path)
    return Usage(
        input_tokens=int_field(provider, usage, "promptTokenCount", path)
        + int_field(provider, usage, "toolUsePromptTokenCount", path),
        output_tokens=int_field(provider, usage, "candidatesTokenCount", path) + thoughts,
        reasoning_tokens=thoughts,
        cache_read_tokens=int_field(provider, usage, "cachedContentTokenCount", path),
    )


def _models_url(url: Any) -> Any:
    """Accept the API base (``.../v1beta``) as well as the models collection URL."""
    if isinstance(url, str) and not urlsplit(url).path.rstrip("/").endswith("/models"):
        return url.rstrip("/") + "/models"
    return url


def _bad_request(request: ModelRequest, detail: str) -> ProviderCallError:
    return ProviderCallError(
        f"provider `{request.provider}`: {detail}",
        retryable=False,
        applied="not_applied",
        code="provider.invalid_request",
    )
