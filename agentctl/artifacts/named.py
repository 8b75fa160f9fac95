"""Finding an artifact version by name: ``report`` (the newest) or ``report@3``.

Operators name artifacts the way workflows declare them; a digest (``sha256:…`` or a
unique hex prefix) still names a blob directly.
"""

from __future__ import annotations

import re

from agentctl.artifacts.models import ArtifactRef
from agentctl.artifacts.store import ArtifactStore
from agentctl.errors import NotFoundError, UsageError

__all__ = ["find_version", "parse_name_version"]

_HEX_PREFIX = re.compile(r"^[0-9a-f]{8,64}$")


def parse_name_version(text: str) -> tuple[str, int | None]:
    """``report`` -> ``("report", None)``; ``report@3`` -> ``("report", 3)``."""
    name, sep, version = text.rpartition("@")
    if not sep:
        return text, None
    if not name or not version.isdigit() or int(version) < 1:
        raise UsageError(
            f"artifact `{text}` is not NAME or NAME@VERSION",
            code="artifact.bad_name",
            hint="e.g. report or report@3 (versions start at 1)",
        )
    return name, int(version)


def find_version(artifacts: ArtifactStore, text: str) -> ArtifactRef | None:
    """The version ``text`` names, or ``None`` when ``text`` is a digest (or its prefix)
    that names no artifact. Unknown names and versions are ``NotFoundError``."""
    if text.startswith("sha256:"):
        return None
    name, version = parse_name_version(text)
    versions = artifacts.versions(name)
    if not versions:
        if version is None and _HEX_PREFIX.match(text):
            return None
        raise NotFoundError(
            f"no artifact named `{name}` has been recorded",
            code="artifact.not_found",
            hint="list names with `agentctl artifacts list`",
        )
    if version is None:
        return versions[-1]
    for ref in versions:
        if ref.version == version:
            return ref
    raise NotFoundError(
        f"artifact `{text}` does not exist: `{name}` has versions 1 to {versions[-1].version}",
        code="artifact.not_found",
        hint=f"see them with `agentctl artifacts versions {name}`",
    )
