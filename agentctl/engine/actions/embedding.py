"""Which embedder a workflow's long-term memory uses, wired from its ``spec.providers``.

Memory knows how to embed (agentctl.memory.embedders); which provider endpoint and
credential an ``openai`` embedding posts to is the providers' business. The two are
siblings on one floor (docs/architecture.md), so the engine, which sees both, joins them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.errors import UsageError
from agentctl.memory.embedders import (
    Embedder,
    LocalHashEmbedder,
    OpenAICompatibleEmbedder,
)
from agentctl.spec.models_runtime import Embedding

__all__ = ["build_embedder"]


def build_embedder(
    config: Mapping[str, Any] | None,
    providers: Mapping[str, Mapping[str, Any]],
    *,
    environ: Mapping[str, str],
) -> Embedder:
    """The embedder for ``memory.longTerm.embedding`` (docs/memory.md) and ``spec.providers``.

    ``local_hash`` (default) needs nothing. A provider of kind ``openai`` posts to its
    endpoint's base URL + ``/embeddings`` (a trailing ``/responses`` or
    ``/chat/completions`` is dropped) with the provider's credential and headers. A
    provider of kind ``fake`` embeds like ``local_hash`` under its own name, so scripted
    CI runs need no network.
    """
    config = config or {}
    provider = str(config.get("provider") or Embedding.default_of("provider"))
    dimensions = int(config.get("dimensions") or Embedding.default_of("dimensions"))
    if provider == "local_hash":
        return LocalHashEmbedder(dimensions)
    definition = providers.get(provider)
    if definition is None:
        raise UsageError(
            f"embedding provider `{provider}` is not in spec.providers",
            code="memory.invalid_embedding",
        )
    kind = definition.get("kind")
    if kind == "fake":
        return LocalHashEmbedder(dimensions, provider=provider)
    if kind != "openai":
        raise UsageError(
            f"embedding provider `{provider}` has kind `{kind}`; use openai or fake",
            code="memory.invalid_embedding",
        )
    from agentctl.providers.endpoint import resolve_endpoint
    from agentctl.providers.openai import DEFAULT_RESPONSES_URL

    resolved = resolve_endpoint(
        provider,
        definition,
        environ=environ,
        default_url=DEFAULT_RESPONSES_URL,
        auth_headers=lambda key: {"authorization": f"Bearer {key}"},
    )
    base = resolved.target.url.rstrip("/")
    for suffix in ("/responses", "/chat/completions", "/embeddings"):
        base = base.removesuffix(suffix)
    return OpenAICompatibleEmbedder(
        base,
        str(config.get("model") or ""),
        provider=provider,
        headers=resolved.target.headers,
        dimensions=dimensions if "dimensions" in config else None,
    )
