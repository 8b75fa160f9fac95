"""The ``openai`` and ``azure_openai`` kinds: which wire format, which URL, which auth.

The provider model (docs/providers.md) has no field that picks an API, so the ``endpoint`` decides:

- path ends with ``/chat/completions`` -> Chat Completions (``OpenAIChatProvider``), the
  mode for Ollama, vLLM, llama.cpp and LM Studio;
- anything else -> the Responses API (``OpenAIResponsesProvider``). The endpoint is the
  full URL, as in the reference (default ``https://api.openai.com/v1/responses``); a bare
  base URL ending in ``/v1`` gets ``/responses`` appended, for convenience.

``azure_openai`` always uses the Responses API with the ``api-key`` header and the
``api-version`` query parameter (``apiVersion``, default ``v1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agentctl.providers.endpoint import resolve_endpoint
from agentctl.providers.http import TextSink
from agentctl.providers.openai_chat import OpenAIChatProvider
from agentctl.providers.openai_responses import DEFAULT_RESPONSES_URL, OpenAIResponsesProvider
from agentctl.spec.capabilities import CHAT_CAPABILITIES, is_chat_endpoint

__all__ = [
    "CHAT_CAPABILITIES",
    "DEFAULT_RESPONSES_URL",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "build_azure_openai",
    "build_openai",
    "is_chat_endpoint",
]


def build_openai(
    name: str,
    definition: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    on_text_delta: TextSink | None = None,
) -> OpenAIResponsesProvider | OpenAIChatProvider:
    """The provider for a ``kind: openai`` entry (credential: ``Authorization: Bearer``)."""
    url = _responses_url(definition.get("endpoint") or DEFAULT_RESPONSES_URL)
    endpoint = resolve_endpoint(
        name,
        {**definition, "endpoint": url},
        environ=environ,
        default_url=DEFAULT_RESPONSES_URL,
        auth_headers=lambda key: {"authorization": f"Bearer {key}"},
    )
    if is_chat_endpoint(url):
        return OpenAIChatProvider(endpoint, on_text_delta=on_text_delta)
    return OpenAIResponsesProvider(endpoint, on_text_delta=on_text_delta)


def build_azure_openai(
    name: str,
    definition: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    on_text_delta: TextSink | None = None,
) -> OpenAIResponsesProvider:
    """The provider for a ``kind: azure_openai`` entry (``endpoint`` is required)."""
    endpoint = resolve_endpoint(
        name,
        definition,
        environ=environ,
        default_url=None,
        auth_headers=lambda key: {"api-key": key},
        params={"api-version": str(definition.get("apiVersion") or "v1")},
    )
    return OpenAIResponsesProvider(endpoint, on_text_delta=on_text_delta)


def _responses_url(url: Any) -> Any:
    if isinstance(url, str) and urlsplit(url).path.rstrip("/").endswith("/v1"):
        return url.rstrip("/") + "/responses"
    return url
