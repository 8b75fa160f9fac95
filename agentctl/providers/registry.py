"""Build provider instances from ``spec.providers`` entries.

The executor builds one instance per entry and keeps it for the whole CLI process; that is
what makes the fake's ``failFirst`` counter shared by every agent using the entry (§20
quirk 9). Only the fake is available in this build; the HTTP providers (OpenAI, Azure
OpenAI, Anthropic, Google) are a separate piece of work and fail here with a clear error
instead of half-working.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from agentctl.errors import ProviderError
from agentctl.providers.base import Provider
from agentctl.providers.fake import FakeProvider, Sleep

__all__ = ["HTTP_PROVIDER_KINDS", "PROVIDER_KINDS", "build_provider"]

HTTP_PROVIDER_KINDS = ("openai", "azure_openai", "anthropic", "google")
PROVIDER_KINDS = ("fake", *HTTP_PROVIDER_KINDS)


def build_provider(
    name: str, definition: Mapping[str, Any], *, sleep: Sleep = asyncio.sleep
) -> Provider:
    """The provider for entry ``name`` (its ``spec.providers`` definition, camelCase keys).

    ``sleep`` is handed to the fake so tests can run ``delayMs`` scripts without waiting.
    """
    kind = definition.get("kind")
    if kind == "fake":
        return FakeProvider(name, sleep=sleep)
    if kind in HTTP_PROVIDER_KINDS:
        raise ProviderError(
            f"provider kind `{kind}` is not available in this build yet; "
            f"provider `{name}` cannot be used",
            code="provider.unavailable",
            hint="use a provider of kind `fake` to run the workflow offline",
        )
    raise ProviderError(
        f"provider `{name}` has unknown kind {kind!r}; expected one of {list(PROVIDER_KINDS)}",
        code="provider.unknown_kind",
    )
