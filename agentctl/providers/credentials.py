"""Provider credentials and header values from secret references (reference §5.1, §7).

Providers resolve ``{env: NAME}`` references against an *injected* environment mapping, so
tests and the engine decide what a provider can see. The resolved value lives only in
memory: anything returned for display or storage is a ``SecretDescription`` (where the
value came from and its SHA-256), never the value. ``{file}`` and ``{process}`` references
are resolved by the policy layer, which owns ``secretFileRoots`` and the process
allow-list; handed one here, a provider refuses it with a clear error instead of guessing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentctl.errors import ProviderError

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
"""The variable read when a provider entry has no ``credential`` (§7)."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SecretDescription:
    """What may be shown or stored about a secret: its source and a digest of its value."""

    source: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "sha256": self.sha256}


@dataclass(frozen=True)
class ResolvedSecret:
    """A resolved secret. ``value`` is excluded from ``repr`` so it never lands in a log."""

    source: str
    value: str = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.value.encode()).hexdigest()

    def describe(self) -> SecretDescription:
        return SecretDescription(source=self.source, sha256=self.sha256)


def resolve_secret(
    ref: Any, *, environ: Mapping[str, str], purpose: str, provider: str
) -> ResolvedSecret:
    """Resolve one ``{env: NAME}`` reference; ``purpose`` names it in error messages.

    One trailing LF or CRLF is stripped and an empty result is an error (§5.1), so a
    variable holding only a newline counts as missing.
    """
    if not isinstance(ref, Mapping) or len(ref) != 1:
        raise ProviderError(
            f"provider `{provider}`: {purpose} must be a secret reference like {{env: NAME}}",
            code="provider.credential_invalid",
        )
    ((shape, target),) = ref.items()
    if shape in ("file", "process"):
        from agentctl.policy.secrets import resolve_policy_reference

        found = resolve_policy_reference(ref)
        if found is not None:
            return ResolvedSecret(source=found[0], value=found[1])
    if shape != "env":
        raise ProviderError(
            f"provider `{provider}`: {purpose} uses a `{shape}` secret reference, which "
            "providers cannot resolve on their own",
            code="provider.credential_unsupported",
            hint="use {env: NAME}, or let the policy layer resolve file/process secrets",
        )
    if not isinstance(target, str) or not _ENV_NAME.match(target):
        raise ProviderError(
            f"provider `{provider}`: {purpose} names an invalid environment variable {target!r}",
            code="provider.credential_invalid",
        )
    value = environ.get(target)
    if value is not None:
        value = _strip_one_newline(value)
    if not value:
        raise ProviderError(
            f"provider `{provider}`: {purpose} environment variable `{target}` is not set or empty",
            code="provider.credential_missing",
            hint=f"export {target}=... before running the workflow",
        )
    return ResolvedSecret(source=f"env:{target}", value=value)


def _strip_one_newline(value: str) -> str:
    if value.endswith("\r\n"):
        return value[:-2]
    if value.endswith("\n"):
        return value[:-1]
    return value
