"""Build provider instances from ``spec.providers`` entries.

The executor builds one instance per entry and keeps it for the whole CLI process; that is
what makes the fake's ``failFirst`` counter shared by every agent using the entry
(docs/fake-provider.md). Building resolves the entry's credential and headers from
``environ`` (default: the process environment), so a missing credential fails here with
``provider.credential_missing`` (exit 6) before any request is made.

Kinds: ``fake``; ``openai`` (Responses API, or Chat Completions when the endpoint ends in
``/chat/completions``); ``azure_openai``; ``anthropic``; ``google`` (Gemini
generateContent); ``command`` (an agent CLI, beyond the reference).
The HTTP modules import httpx, so they are imported only when such a provider is built:
importing the registry stays cheap for ``agentctl --help``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentctl.errors import ProviderError
from agentctl.providers.base import Provider
from agentctl.providers.command import CommandProvider
from agentctl.providers.fake import FakeProvider, Sleep
from agentctl.sandbox import SandboxView
from agentctl.spec.capabilities import PROVIDER_CAPABILITIES

__all__ = [
    "AVAILABLE_PROVIDER_KINDS",
    "HTTP_PROVIDER_KINDS",
    "PROVIDER_CAPABILITIES",
    "PROVIDER_KINDS",
    "build_provider",
    "describe_provider",
]

HTTP_PROVIDER_KINDS = ("openai", "azure_openai", "anthropic", "google")
PROVIDER_KINDS = ("fake", *HTTP_PROVIDER_KINDS, "command")
AVAILABLE_PROVIDER_KINDS = ("fake", "openai", "azure_openai", "anthropic", "google", "command")


def build_provider(
    name: str,
    definition: Mapping[str, Any],
    *,
    sleep: Sleep = asyncio.sleep,
    environ: Mapping[str, str] | None = None,
    process_allowlist: Sequence[str] = (),
    cwd: Path | None = None,
    on_text_delta: Callable[[str], None] | None = None,
    sandbox_view: SandboxView | None = None,
) -> Provider:
    """The provider for entry ``name`` (its ``spec.providers`` definition, camelCase keys).

    ``sleep`` is handed to the fake so tests can run ``delayMs`` scripts without waiting.
    ``environ`` resolves ``{env: NAME}`` credentials and headers (default ``os.environ``;
    the engine may pass a policy-filtered mapping). ``process_allowlist`` is
    ``policy.processAllowlist`` for ``command`` providers; ``cwd`` their working
    directory, and ``sandbox_view`` what a sandboxed one sees of the host (default: ``cwd``
    read-only). ``on_text_delta`` receives streamed text from HTTP providers.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    kind = definition.get("kind")
    if kind == "fake":
        return FakeProvider(name, sleep=sleep)
    if kind == "command":
        return CommandProvider(
            name,
            definition,
            environ=env,
            process_allowlist=process_allowlist,
            cwd=cwd,
            sandbox_view=sandbox_view,
        )
    if kind in ("openai", "azure_openai"):
        from agentctl.providers.openai import build_azure_openai, build_openai

        build = build_openai if kind == "openai" else build_azure_openai
        return build(name, definition, environ=env, on_text_delta=on_text_delta)
    if kind == "anthropic":
        from agentctl.providers.anthropic import build_anthropic

        return build_anthropic(name, definition, environ=env, on_text_delta=on_text_delta)
    if kind == "google":
        from agentctl.providers.google import build_google

        return build_google(name, definition, environ=env)
    if kind in HTTP_PROVIDER_KINDS:
        raise ProviderError(
            f"provider kind `{kind}` is not available in this build yet; "
            f"provider `{name}` cannot be used",
            code="provider.unavailable",
            hint="use a provider of kind `fake`, `openai`, `anthropic` or `command`",
        )
    raise ProviderError(
        f"provider `{name}` has unknown kind {kind!r}; expected one of {list(PROVIDER_KINDS)}",
        code="provider.unknown_kind",
    )


def describe_provider(
    name: str,
    definition: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    process_allowlist: Sequence[str] = (),
) -> dict[str, Any]:
    """What ``auth check`` may print: kind, endpoint or command, secret sources and SHA-256.

    Builds the provider (so a missing credential raises exactly as a run would) and never
    returns a secret value.
    """
    provider = build_provider(
        name, definition, environ=environ, process_allowlist=process_allowlist
    )
    out: dict[str, Any] = {
        "provider": name,
        "kind": provider.kind,
        "api": getattr(provider, "api", None),
        "capabilities": sorted(provider.capabilities),
    }
    endpoint = getattr(provider, "endpoint", None)
    if endpoint is not None:
        out.update(endpoint.describe())
    if isinstance(provider, CommandProvider):
        out["command"] = provider.command
        out["promptVia"] = provider.prompt_via
        out["env"] = {key: desc.to_json() for key, desc in provider.env_sources.items()}
    return out
