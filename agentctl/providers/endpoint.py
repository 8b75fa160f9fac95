"""From a ``spec.providers`` entry to an HTTP target: URL, auth and extra headers
(docs/providers.md).

Resolution happens once, when the provider is built, so a missing credential fails before
any request (``provider.credential_missing``, exit 6) and every later call reuses the same
headers. ``describe()`` is what ``auth check`` / ``providers inspect`` may show: sources and
SHA-256 digests, never a value.

Loopback exception: an entry whose ``endpoint`` points at ``localhost``, ``127.0.0.1`` or
``::1`` and that declares no ``credential`` may run without one (Ollama, vLLM, llama.cpp
and LM Studio ignore keys); the default variable is still used when it is set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from agentctl.errors import ProviderError
from agentctl.providers.base import ProviderCallError
from agentctl.providers.credentials import (
    DEFAULT_CREDENTIAL_ENV,
    ResolvedSecret,
    SecretDescription,
    resolve_secret,
)
from agentctl.providers.http import HttpTarget

__all__ = ["LOOPBACK_HOSTS", "ResolvedEndpoint", "check_options", "resolve_endpoint"]

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

AuthHeaders = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True)
class ResolvedEndpoint:
    """A provider entry ready to call; ``target`` holds secret header values."""

    name: str
    kind: str
    target: HttpTarget
    credential: SecretDescription | None
    header_sources: Mapping[str, SecretDescription] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """Safe to print or store: the URL, where secrets came from, and their digests."""
        return {
            "provider": self.name,
            "kind": self.kind,
            "endpoint": self.target.url,
            "credential": None if self.credential is None else self.credential.to_json(),
            "headers": {name: desc.to_json() for name, desc in self.header_sources.items()},
        }


def resolve_endpoint(
    name: str,
    definition: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    default_url: str | None,
    auth_headers: AuthHeaders,
    params: Mapping[str, str] | None = None,
) -> ResolvedEndpoint:
    """Resolve URL, credential and headers; standard auth headers win over custom ones."""
    kind = str(definition.get("kind"))
    url = definition.get("endpoint") or default_url
    if not isinstance(url, str) or not url:
        raise ProviderError(
            f"provider `{name}` of kind `{kind}` needs an `endpoint`",
            code="provider.endpoint_missing",
        )
    credential = _credential(name, kind, definition, url, environ)
    headers: dict[str, str] = {}
    sources: dict[str, SecretDescription] = {}
    secrets: list[str] = [] if credential is None else [credential.value]
    custom = definition.get("headers") or {}
    if not isinstance(custom, Mapping):
        raise ProviderError(
            f"provider `{name}`: `headers` must map header names to secret references",
            code="provider.credential_invalid",
        )
    for header, ref in custom.items():
        secret = resolve_secret(ref, environ=environ, purpose=f"header `{header}`", provider=name)
        headers[str(header).lower()] = secret.value
        sources[str(header)] = secret.describe()
        secrets.append(secret.value)
    if credential is not None:
        headers.update(
            {key.lower(): value for key, value in auth_headers(credential.value).items()}
        )
    return ResolvedEndpoint(
        name=name,
        kind=kind,
        target=HttpTarget(
            url=url, headers=headers, params=dict(params or {}), secrets=tuple(secrets)
        ),
        credential=None if credential is None else credential.describe(),
        header_sources=sources,
    )


def check_options(
    provider: str, options: Mapping[str, Any], allowed: Mapping[str, Callable[[Any], bool]]
) -> None:
    """Re-check ``providerOptions`` at run time (the compiler checked them once,
    docs/providers.md)."""
    for key, value in options.items():
        check = allowed.get(key)
        if check is None:
            raise _bad_option(provider, f"unknown option `{key}`", allowed)
        if not check(value):
            raise _bad_option(provider, f"option `{key}` has an invalid value {value!r}", allowed)


def _credential(
    name: str, kind: str, definition: Mapping[str, Any], url: str, environ: Mapping[str, str]
) -> ResolvedSecret | None:
    ref = definition.get("credential")
    if ref is not None:
        return resolve_secret(ref, environ=environ, purpose="credential", provider=name)
    variable = DEFAULT_CREDENTIAL_ENV.get(kind)
    if variable is None:
        return None
    if _is_loopback(url) and not environ.get(variable, "").strip():
        return None
    return resolve_secret({"env": variable}, environ=environ, purpose="credential", provider=name)


def _is_loopback(url: str) -> bool:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host in LOOPBACK_HOSTS


def _bad_option(
    provider: str, detail: str, allowed: Mapping[str, Callable[[Any], bool]]
) -> ProviderCallError:
    names = ", ".join(sorted(allowed)) or "none"
    return ProviderCallError(
        f"provider `{provider}`: invalid providerOptions: {detail}",
        retryable=False,
        applied="not_applied",
        code="provider.invalid_request",
        hint=f"allowed providerOptions for this kind: {names} (docs/providers.md)",
    )
