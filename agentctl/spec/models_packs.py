"""Packs and pack trust **[ADV]** (docs/workflow-language.md).

Modelled so documents that declare packs parse and round-trip; loading pack manifests and
verifying signatures is outside the document model.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from agentctl.spec.models_common import SpecModel

__all__ = [
    "GitPackSource",
    "Pack",
    "PackSignature",
    "PackSource",
    "PackTrust",
    "PathPackSource",
    "TrustedIdentity",
    "UrlPackSource",
]

_INTEGRITY_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


def _check_integrity(value: str) -> str:
    if _INTEGRITY_RE.fullmatch(value) is None:
        raise ValueError("integrity must be `sha256:` followed by 64 lowercase hex characters")
    return value


class PathPackSource(SpecModel):
    """A pack in a local directory."""

    path: str = Field(min_length=1)


class GitPackSource(SpecModel):
    """A pack pinned to a git commit."""

    git: str = Field(min_length=1)
    rev: str
    manifest: str | None = None

    @field_validator("rev")
    @classmethod
    def _commit(cls, value: str) -> str:
        if _COMMIT_RE.fullmatch(value) is None:
            raise ValueError("rev must be a full 40-hex commit id")
        return value


class UrlPackSource(SpecModel):
    """A pack archive fetched over HTTPS and pinned by digest."""

    url: str
    integrity: str
    manifest: str | None = None

    @field_validator("url")
    @classmethod
    def _https(cls, value: str) -> str:
        if not value.startswith("https://"):
            raise ValueError("a pack url must use https")
        return value

    @field_validator("integrity")
    @classmethod
    def _integrity(cls, value: str) -> str:
        return _check_integrity(value)


def _source_shape(value: Any) -> str:
    """Pick the source shape by its distinguishing key so errors name one shape only."""
    if isinstance(value, dict):
        return "git-source" if "git" in value else "url-source" if "url" in value else "path-source"
    if isinstance(value, GitPackSource):
        return "git-source"
    return "url-source" if isinstance(value, UrlPackSource) else "path-source"


PackSource = Annotated[
    # Tags must not equal a field name: error locations include them (see model_errors).
    Annotated[PathPackSource, Tag("path-source")]
    | Annotated[GitPackSource, Tag("git-source")]
    | Annotated[UrlPackSource, Tag("url-source")],
    Discriminator(_source_shape),
]


class PackSignature(SpecModel):
    """A Sigstore bundle and the identity expected to have signed it."""

    bundle: str
    identity: str
    issuer: str


class Pack(SpecModel):
    """One pack dependency: a local path with integrity, or a ``source``."""

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    path: str | None = None
    integrity: str | None = None
    source: PackSource | None = None
    signature: PackSignature | None = None

    @model_validator(mode="after")
    def _one_location(self) -> Pack:
        if self.source is None:
            if self.path is None or self.integrity is None:
                raise ValueError("a pack needs either `path` and `integrity`, or `source`")
            _check_integrity(self.integrity)
        elif self.path is not None or self.integrity is not None:
            raise ValueError("a pack with `source` cannot also set `path` or `integrity`")
        return self


class TrustedIdentity(SpecModel):
    """A signer identity accepted for packs."""

    identity: str
    issuer: str


class PackTrust(SpecModel):
    """How unsigned or untrusted packs are treated."""

    unsigned: Literal["deny", "warn", "allow"] = "warn"
    identities: list[TrustedIdentity] = Field(default_factory=list)
    allow_unsigned_process: bool = False
