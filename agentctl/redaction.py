"""Hiding secret values in text that leaves the process (messages, logs, stored errors).

Tools, providers and the engine all redact what a child process or a remote service
printed before it is stored or shown, so this lives on the bottom floor
(docs/architecture.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MASK", "REDACTED", "masked_url", "redact"]

REDACTED = "[REDACTED]"

#: What a database URL shows in place of its password.
MASK = "***"

_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*):([^/?#]*)@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each non-empty secret value with ``[REDACTED]``.

    One regex pass with the longest secrets first: a secret that contains another is
    redacted whole, and a short secret never matches inside an earlier ``[REDACTED]``.
    """
    values = sorted({secret for secret in secrets if secret}, key=lambda s: (-len(s), s))
    if not values:
        return text
    pattern = re.compile("|".join(re.escape(value) for value in values))
    return pattern.sub(REDACTED, text)


def masked_url(value: str) -> str:
    """``value`` with a URL's password shown as ``***`` (in its user info, or a
    ``password=`` query parameter); anything else, a file path included, unchanged.

    Every place that shows a database URL (messages, hints, JSON, logs) shows it so; only
    what connects, and the children it starts (through their environment), see it whole.
    """
    if "://" not in value:
        return value
    masked = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", value, count=1)
    return _QUERY_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}", masked)
