"""Hiding secret values in text that leaves the process (messages, logs, stored errors).

Tools, providers and the engine all redact what a child process or a remote service
printed before it is stored or shown, so this lives on the bottom floor
(docs/architecture.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "redact"]

REDACTED = "[REDACTED]"


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
