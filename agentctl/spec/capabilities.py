"""What each provider kind can do: the one capability table.

The compiler negotiates an agent's needs against it before a run exists (an agent that asks
for something its provider lacks is ``unsupported_capability``), and every provider class
declares its ``capabilities`` from it, so ``check`` and ``roll`` cannot disagree. It sits
below both (no httpx, no provider code) so either side can read it cheaply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "ANTHROPIC_CAPABILITIES",
    "CAPABILITY_ORDER",
    "CHAT_CAPABILITIES",
    "COMMAND_CAPABILITIES",
    "FAKE_CAPABILITIES",
    "GOOGLE_CAPABILITIES",
    "OPENAI_CAPABILITIES",
    "PROVIDER_CAPABILITIES",
    "is_chat_endpoint",
    "provider_capabilities",
]

CAPABILITY_ORDER: tuple[str, ...] = (
    "text",
    "function_tools",
    "structured_output",
    "reasoning_effort",
    "reasoning_mode",
    "continuation",
    "usage",
    "cost_metadata",
    "cancellation",
    "persisted_reasoning",
    "prompt_caching",
    "multiple_function_calls",
    "response_storage",
    "streaming",
)
"""Upstream's check order: the first missing capability in this order is the one reported."""

BASE = frozenset({"text", "usage", "cancellation"})

FAKE_CAPABILITIES = BASE | {"function_tools", "structured_output", "continuation", "streaming"}
"""The scripted ``fake``: tools, structured output, continuation and streaming."""

OPENAI_CAPABILITIES = BASE | {
    "function_tools",
    "structured_output",
    "reasoning_effort",
    "reasoning_mode",
    "continuation",
    "persisted_reasoning",
    "prompt_caching",
    "multiple_function_calls",
    "response_storage",
    "streaming",
}
"""``openai`` and ``azure_openai`` over the Responses API."""

CHAT_CAPABILITIES = OPENAI_CAPABILITIES - {"persisted_reasoning", "response_storage"}
"""An ``openai`` entry in Chat Completions mode keeps no server-side state."""

ANTHROPIC_CAPABILITIES = BASE | {
    "function_tools",
    "structured_output",
    "reasoning_effort",
    "continuation",
    "streaming",
}
"""Messages API, including its server-sent event stream."""

GOOGLE_CAPABILITIES = BASE | {
    "function_tools",
    "structured_output",
    "reasoning_effort",
    "continuation",
}
"""Gemini ``generateContent``; this build does not stream it."""

COMMAND_CAPABILITIES = BASE
"""An agent CLI: text in, text out; usage is estimated from byte counts."""

PROVIDER_CAPABILITIES: Mapping[str, frozenset[str]] = {
    "fake": FAKE_CAPABILITIES,
    "openai": OPENAI_CAPABILITIES,
    "azure_openai": OPENAI_CAPABILITIES,
    "anthropic": ANTHROPIC_CAPABILITIES,
    "google": GOOGLE_CAPABILITIES,
    "command": COMMAND_CAPABILITIES,
}
"""Per kind; an ``openai`` entry in Chat mode has ``CHAT_CAPABILITIES`` instead."""


def is_chat_endpoint(url: str) -> bool:
    """True when ``url`` selects Chat Completions mode (its path ends ``/chat/completions``)."""
    return urlsplit(url).path.rstrip("/").endswith("/chat/completions")


def provider_capabilities(definition: Mapping[str, Any]) -> frozenset[str]:
    """What the ``spec.providers`` entry ``definition`` offers (empty for an unknown kind)."""
    kind = str(definition.get("kind"))
    endpoint = definition.get("endpoint")
    if kind == "openai" and isinstance(endpoint, str) and is_chat_endpoint(endpoint):
        return CHAT_CAPABILITIES
    return PROVIDER_CAPABILITIES.get(kind, frozenset())
