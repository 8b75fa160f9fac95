"""Injected clock and id generation.

The engine never reads the wall clock or ``uuid`` directly: it takes a :class:`Clock` and an
:class:`IdGenerator`, so tests drive time and ids deterministically and never sleep.
Ids are UUIDv7 (RFC 9562: 48-bit millisecond timestamp, then random bits), so they sort by
creation time, with a kind prefix: ``run-…``, ``retry-…``, ``approval-…``.

Test-only seam: with ``AGENTCTL_TEST_NOW`` set to an ISO 8601 time, every
:class:`SystemClock` reads that time (it stands still) and :class:`IdGenerator` draws its
"random" bits from a counter, so one process's ids are the same on every run. The snapshot
tests of the human views (tests/cli/test_view_snapshots.py) start each ``agentctl`` process
with its own time. It is not for production: nothing moves while the clock stands still,
and two processes given the same time make the same ids.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

__all__ = [
    "RUN_PREFIXES",
    "Clock",
    "FixedClock",
    "IdGenerator",
    "TEST_NOW_ENV",
    "SystemClock",
    "approval_id",
    "uuid7",
]

RUN_PREFIXES = ("run", "retry", "repair", "fork", "compensate", "replay")
TEST_NOW_ENV = "AGENTCTL_TEST_NOW"
"""Test-only: pin the clock and derive ids from a counter (see the module docstring)."""


def _pinned_now() -> datetime | None:
    text = os.environ.get(TEST_NOW_ENV)
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        from agentctl.errors import UsageError

        raise UsageError(
            f"{TEST_NOW_ENV}={text!r} is not an ISO 8601 time",
            hint=f"unset {TEST_NOW_ENV} (it is for agentctl's own tests), or give a time such "
            "as 2026-03-01T09:00:00Z",
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_test_counter = itertools.count(1)


def _counted_bytes(size: int) -> bytes:
    """Stand-in for ``os.urandom`` under :data:`TEST_NOW_ENV`: 1, 2, 3… in this process."""
    return next(_test_counter).to_bytes(size, "big")


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic scale, for timeouts and durations."""
        ...


class SystemClock:
    """The wall clock (or, for agentctl's own tests, the time in :data:`TEST_NOW_ENV`)."""

    def __init__(self) -> None:
        self._pinned = _pinned_now()

    def now(self) -> datetime:
        if self._pinned is not None:
            return self._pinned
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class FixedClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        from datetime import timedelta

        self._now += timedelta(seconds=seconds)
        self._mono += seconds


def uuid7(unix_ms: int, rand: bytes) -> uuid.UUID:
    """Build a UUIDv7 from a millisecond timestamp and at least 10 random bytes."""
    if len(rand) < 10:
        raise ValueError("uuid7 needs 10 random bytes")
    value = (unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (int.from_bytes(rand[0:2], "big") & 0x0FFF) << 64
    value |= 0b10 << 62
    value |= int.from_bytes(rand[2:10], "big") & ((1 << 62) - 1)
    return uuid.UUID(int=value)


class IdGenerator:
    """Makes prefixed UUIDv7 ids, strictly increasing within one process."""

    def __init__(
        self,
        clock: Clock | None = None,
        random_bytes: Callable[[int], bytes] | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        if random_bytes is None:
            random_bytes = _counted_bytes if os.environ.get(TEST_NOW_ENV) else os.urandom
        self._random = random_bytes
        self._lock = threading.Lock()
        self._last_ms = -1
        self._seq = 0

    def new(self, prefix: str) -> str:
        with self._lock:
            ms = int(self._clock.now().timestamp() * 1000)
            if ms <= self._last_ms:
                # Same (or earlier) millisecond: keep ids monotonic by counting on.
                ms = self._last_ms
                self._seq += 1
            else:
                self._seq = 0
            self._last_ms = ms
            rand = bytearray(self._random(10))
            rand[0] = (self._seq >> 8) & 0x0F
            rand[1] = self._seq & 0xFF
            return f"{prefix}-{uuid7(ms, bytes(rand))}"

    def run_id(self, mode: str = "run") -> str:
        if mode not in RUN_PREFIXES:
            raise ValueError(f"unknown run id prefix {mode!r}")
        return self.new(mode)


def approval_id(effect_id: str) -> str:
    """``approval-`` + the first 16 hex of the effect id (docs/cli-reference.md)."""
    return "approval-" + effect_id[:16]
