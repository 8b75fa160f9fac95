"""Provider capability negotiation at compile time (docs/providers.md, docs/fake-provider.md).

What each kind offers is the one table in :mod:`agentctl.spec.capabilities`, which the
provider classes declare too. A workflow that asks a provider for something it cannot do
fails before any run exists:
``unsupported_capability`` names the first missing capability in the upstream check
order, so the same document gets the same diagnostic here and upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.spec.capabilities import BASE, CAPABILITY_ORDER, provider_capabilities

__all__ = [
    "CAPABILITY_ORDER",
    "PROVIDER_OPTIONS",
    "option_type_error",
    "provider_capabilities",
    "required_capabilities",
]

_OPENAI_OPTIONS: Mapping[str, str] = {
    "store": "bool",
    "reasoningContext": "reasoning_context",
    "promptCacheMode": "cache_mode",
    "promptCacheTtl": "cache_ttl",
    "parallelToolCalls": "bool",
    "safetyIdentifier": "string",
}
PROVIDER_OPTIONS: Mapping[str, Mapping[str, str]] = {
    "fake": {
        "toolInput": "object",
        "finalText": "string",
        "delayMs": "non_negative_int",
        "failFirst": "non_negative_int",
    },
    "openai": _OPENAI_OPTIONS,
    "azure_openai": _OPENAI_OPTIONS,
    "anthropic": {},
    "google": {},
    "command": {},
}
"""Allow-listed ``providerOptions`` keys per provider kind and the shape of each value."""

_ENUMS: Mapping[str, tuple[str, ...]] = {
    "reasoning_context": ("auto", "current_turn", "all_turns"),
    "cache_mode": ("implicit", "explicit"),
    "cache_ttl": ("30m",),
}


def option_type_error(shape: str, value: Any) -> str | None:
    """Why ``value`` does not fit ``shape`` (``None`` when it fits)."""
    if shape == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    if shape == "string":
        return None if isinstance(value, str) else "must be a string"
    if shape == "object":
        return None if isinstance(value, dict) else "must be an object"
    if shape == "non_negative_int":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return None if ok else "must be a non-negative integer"
    allowed = _ENUMS[shape]
    if value in allowed and isinstance(value, str):
        return None
    return "must be one of " + ", ".join(f"`{v}`" for v in allowed)


def required_capabilities(agent: Mapping[str, Any], *, pricing_present: bool) -> list[str]:
    """What ``agent`` needs from its provider, in the upstream check order."""
    required = set(BASE)
    options = agent.get("providerOptions") or {}
    if agent.get("tools"):
        required |= {"function_tools", "continuation"}
    if agent.get("structuredOutput") is not None:
        required.add("structured_output")
    reasoning = agent.get("reasoning")
    if reasoning is not None:
        required.add("reasoning_effort")
        if reasoning.get("mode") is not None:
            required.add("reasoning_mode")
    usage_limit = agent.get("usageLimit") or {}
    if usage_limit.get("maxCostUsd") is not None and not pricing_present:
        required.add("cost_metadata")
    if "reasoningContext" in options:
        required.add("persisted_reasoning")
    if "promptCacheMode" in options or "promptCacheTtl" in options:
        required.add("prompt_caching")
    if "parallelToolCalls" in options:
        required.add("multiple_function_calls")
    if "store" in options:
        required.add("response_storage")
    if agent.get("stream") is True:
        required.add("streaming")
    return [name for name in CAPABILITY_ORDER if name in required]
