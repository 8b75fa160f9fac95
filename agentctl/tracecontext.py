"""The W3C ``traceparent`` of the call in flight, for the clients that pass it on.

The engine sets it around each dispatch when telemetry is on; the MCP and A2A clients add
it to their HTTP requests and process launches put it in the child's environment as
``TRACEPARENT``. It lives on the bottom floor (a context variable, no imports) so the tool
clients need not know about OpenTelemetry, and it is ``None`` whenever telemetry is off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["ENV_VARIABLE", "HEADER", "headers", "outgoing", "propagating", "with_environment"]

HEADER = "traceparent"
#: The environment variable a process reads its parent trace context from.
ENV_VARIABLE = "TRACEPARENT"

_current: ContextVar[str | None] = ContextVar("agentctl_traceparent", default=None)


def outgoing() -> str | None:
    """The ``traceparent`` value of the call in flight, or None when there is none."""
    return _current.get()


def headers() -> dict[str, str]:
    """HTTP headers that carry the call's trace context (empty when there is none)."""
    value = _current.get()
    return {HEADER: value} if value else {}


def with_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` plus ``TRACEPARENT`` for a child process (unchanged when there is none)."""
    value = _current.get()
    return {**env, ENV_VARIABLE: value} if value else env


@contextlib.contextmanager
def propagating(value: str | None) -> Iterator[None]:
    """Make ``value`` the outgoing trace context for the duration of the block."""
    token = _current.set(value)
    try:
        yield
    finally:
        _current.reset(token)
