"""What ``openai`` / ``azure_openai`` agents may put in ``providerOptions`` and ``reasoning``.

Shared by the Responses and Chat Completions wire formats; each maps the checked values to
its own request fields.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from agentctl.providers.base import ModelRequest, ProviderCallError
from agentctl.providers.endpoint import check_options

__all__ = [
    "OPENAI_OPTIONS",
    "checked_options",
    "prompt_cache_key",
    "reasoning_effort",
    "reasoning_summary",
]


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


OPENAI_OPTIONS: Mapping[str, Callable[[Any], bool]] = {
    "store": _is_bool,
    "reasoningContext": lambda v: v in ("auto", "current_turn", "all_turns"),
    "promptCacheMode": lambda v: v in ("implicit", "explicit"),
    "promptCacheTtl": lambda v: v == "30m",
    "parallelToolCalls": _is_bool,
    "safetyIdentifier": lambda v: isinstance(v, str) and bool(v),
}
"""The docs/providers.md allow-list with its value checks."""

# OpenAI has no "max" effort; its highest is "xhigh".
_EFFORTS = {
    "none": "none",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "xhigh",
}
_SUMMARIES = ("auto", "concise", "detailed")


def checked_options(request: ModelRequest) -> Mapping[str, Any]:
    check_options(request.provider, request.options, OPENAI_OPTIONS)
    return request.options


def reasoning_effort(request: ModelRequest) -> str | None:
    """The wire ``effort`` for the agent's ``reasoning.effort``, or None without reasoning."""
    if request.reasoning is None:
        return None
    effort = request.reasoning.get("effort")
    if effort not in _EFFORTS:
        raise _bad_reasoning(request, f"effort {effort!r} is not one of {sorted(_EFFORTS)}")
    return _EFFORTS[str(effort)]


def reasoning_summary(request: ModelRequest) -> str | None:
    """``reasoning.mode`` is sent as the Responses ``reasoning.summary`` setting."""
    if request.reasoning is None or request.reasoning.get("mode") is None:
        return None
    mode = request.reasoning["mode"]
    if mode not in _SUMMARIES:
        raise _bad_reasoning(request, f"mode {mode!r} is not one of {list(_SUMMARIES)}")
    return str(mode)


def prompt_cache_key(request: ModelRequest) -> str | None:
    """With ``promptCacheMode: explicit``, a key shared by requests with the same prefix.

    The key digests what every turn of the agent repeats (model, instructions, tools), so
    all turns and attempts of the agent land on the same cache entry.
    """
    if request.options.get("promptCacheMode") != "explicit":
        return None
    prefix = json.dumps(
        [request.model, request.instructions, [tool.to_json() for tool in request.tools]],
        sort_keys=True,
        separators=(",", ":"),
    )
    return "agentctl-" + hashlib.sha256(prefix.encode()).hexdigest()[:32]


def _bad_reasoning(request: ModelRequest, detail: str) -> ProviderCallError:
    return ProviderCallError(
        f"provider `{request.provider}`: invalid reasoning: {detail}",
        retryable=False,
        applied="not_applied",
        code="provider.invalid_request",
    )
