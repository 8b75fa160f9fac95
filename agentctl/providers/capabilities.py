"""Capabilities per provider kind (reference §7, used by §8.2 negotiation).

Kept apart from the provider modules so the compiler side and the registry can read them
without importing httpx.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.providers.fake import FAKE_CAPABILITIES

__all__ = [
    "ANTHROPIC_CAPABILITIES",
    "CHAT_CAPABILITIES",
    "COMMAND_CAPABILITIES",
    "OPENAI_CAPABILITIES",
    "PROVIDER_CAPABILITIES",
]

BASE = frozenset({"text", "usage", "cancellation"})

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
"""§7 lists no ``streaming`` for ``anthropic``; this build implements its SSE stream."""

COMMAND_CAPABILITIES = BASE
"""An agent CLI: text in, text out; usage is estimated from byte counts."""

PROVIDER_CAPABILITIES: Mapping[str, frozenset[str]] = {
    "fake": FAKE_CAPABILITIES,
    "openai": OPENAI_CAPABILITIES,
    "azure_openai": OPENAI_CAPABILITIES,
    "anthropic": ANTHROPIC_CAPABILITIES,
    "command": COMMAND_CAPABILITIES,
    "google": BASE | {"function_tools", "structured_output", "reasoning_effort", "continuation"},
}
"""Per kind; an ``openai`` entry in Chat mode has ``CHAT_CAPABILITIES`` instead."""
