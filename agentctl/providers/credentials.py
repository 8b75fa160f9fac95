"""Provider credentials and header values from secret references (docs/workflow-language.md,
docs/providers.md).

Resolution itself is :func:`agentctl.policy.secrets.resolve_secret`, the one resolver every
consumer uses; this module names the default credential variable per kind and translates a
reference that does not resolve into the provider vocabulary: ``provider.credential_missing``
or ``provider.credential_invalid`` (exit 6). A ``{file}`` or ``{process}`` reference the
policy does not allow stays a policy error (exit 3 before a run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.errors import ProviderError
from agentctl.policy.secrets import ResolvedSecret, SecretDescription, SecretUnresolved
from agentctl.policy.secrets import resolve_secret as resolve_reference

__all__ = [
    "DEFAULT_CREDENTIAL_ENV",
    "ResolvedSecret",
    "SecretDescription",
    "resolve_secret",
]

DEFAULT_CREDENTIAL_ENV: Mapping[str, str] = {
    "openai": "OPENAI_API_KEY",
    "azure_openai": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}
"""The variable read when a provider entry has no ``credential`` (docs/providers.md)."""


def resolve_secret(
    ref: Any, *, environ: Mapping[str, str], purpose: str, provider: str
) -> ResolvedSecret:
    """Resolve one reference for ``provider``; ``purpose`` names it in error messages."""
    try:
        return resolve_reference(ref, environ=environ, what=f"provider `{provider}` {purpose}")
    except SecretUnresolved as exc:
        code = "provider.credential_invalid" if exc.code == "secret.invalid" else None
        raise ProviderError(
            exc.message, code=code or "provider.credential_missing", hint=exc.hint
        ) from exc
