"""The telemetry bridge's interface and its no-op implementation.

:class:`Telemetry` is what the engine reports to; :mod:`agentctl.observability.otel`
subclasses it with the OpenTelemetry SDK, and :mod:`agentctl.observability.telemetry`
chooses which one is active. Both import this module, so neither imports the other back.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

__all__ = ["AttributeValue", "Span", "Telemetry", "TraceIds"]

TraceIds = tuple[str, str]
AttributeValue = str | bool | int | float | Sequence[str]


class Span:
    """A span handle. The no-op handle has no ids and ignores everything."""

    ids: TraceIds | None = None

    def set(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Add attributes (None values are left out)."""

    def event(self, name: str, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Add a span event."""

    def fail(self, code: str, message: str) -> None:
        """Mark the span's status as an error with an ``exception``-style event."""

    def end(self) -> None:
        """End the span (only for spans from :meth:`Telemetry.start_span`)."""

    def context(self) -> contextvars.Context | None:
        """A copy of the current context with this span current, for ``create_task``."""
        return None


_NOOP_SPAN = Span()


class Telemetry:
    """The no-op bridge; :class:`agentctl.observability.otel.OtelTelemetry` is the real one."""

    enabled = False
    #: Whether prompts and completions may be put on spans (``AGENTCTL_OTEL_CAPTURE_CONTENT``).
    capture_content = False

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        *,
        kind: str = "internal",
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> Iterator[Span]:
        """A span current for the block; an exception escaping it marks it failed."""
        yield _NOOP_SPAN

    def start_span(
        self,
        name: str,
        *,
        attributes: Mapping[str, AttributeValue | None] | None = None,
        links: Sequence[tuple[TraceIds, Mapping[str, AttributeValue]]] = (),
        traceparent: str | None = None,
    ) -> Span:
        """A span that is not made current; ``traceparent`` (W3C) is its remote parent."""
        return _NOOP_SPAN

    def past_span(
        self,
        name: str,
        *,
        start: datetime,
        end: datetime,
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> None:
        """Record a span that already happened (an approval wait across processes)."""

    def current_ids(self) -> TraceIds | None:
        """The ids of the current span, or None."""
        return None

    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` of the current span, or None."""
        return None

    def add(self, metric: str, value: float, attributes: Mapping[str, AttributeValue]) -> None:
        """Add to a counter."""

    def record(self, metric: str, value: float, attributes: Mapping[str, AttributeValue]) -> None:
        """Record a value in a histogram."""

    def shutdown(self) -> None:
        """Flush and stop the exporters."""
