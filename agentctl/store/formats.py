"""The record format version, apart from the tables so reading it imports nothing heavy.

Every versioned row carries ``format_version``; this is the version this code writes and
the newest it reads (``agentctl version`` shows it).
"""

from __future__ import annotations

__all__ = ["FORMAT_VERSION"]

#: The record format this code writes and the newest it can read.
FORMAT_VERSION = 1
