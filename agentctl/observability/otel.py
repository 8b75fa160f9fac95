"""The OpenTelemetry bridge: the official SDK, exporting over OTLP/HTTP (protobuf).

Imported only by :func:`agentctl.observability.telemetry.activate` when telemetry is
enabled, so nothing here costs anything otherwise. The providers are private to agentctl
(the global OpenTelemetry providers are left alone, so libraries that instrument
themselves do not start exporting because agentctl does). The exporters read the standard
variables themselves (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``..._HEADERS``, ``..._TIMEOUT``);
the resource comes from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``, with
``service.name`` ``agentctl`` when neither names one.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentctl.observability.spans import AttributeValue, Span, Telemetry, TraceIds

__all__ = ["OtelTelemetry"]

_KINDS = {
    "internal": SpanKind.INTERNAL,
    "client": SpanKind.CLIENT,
    "server": SpanKind.SERVER,
}

#: Units of the metrics agentctl records (names follow the semantic conventions' style).
_UNITS = {
    "agentctl.runs": "{run}",
    "agentctl.task.attempts": "{attempt}",
    "agentctl.task.duration": "s",
    "agentctl.effects": "{effect}",
    "agentctl.approval.wait": "s",
    "agentctl.budget.refusals": "{refusal}",
    "agentctl.provider.cost": "USD",
    "gen_ai.client.token.usage": "{token}",
    "gen_ai.client.operation.duration": "s",
}


def _clean(attributes: Mapping[str, AttributeValue | None] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


def _ids(context: SpanContext) -> TraceIds | None:
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def _nanos(moment: datetime) -> int:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return int(aware.timestamp() * 1_000_000_000)


class _OtelSpan(Span):
    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self.ids = _ids(span.get_span_context())

    def set(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        self._span.set_attributes(_clean(attributes))

    def event(self, name: str, attributes: Mapping[str, AttributeValue | None]) -> None:
        self._span.add_event(name, _clean(attributes))

    def fail(self, code: str, message: str) -> None:
        self._span.set_status(Status(StatusCode.ERROR, f"{code}: {message}"))
        self._span.set_attribute("error.type", code)
        self._span.add_event("exception", {"exception.type": code, "exception.message": message})

    def end(self) -> None:
        self._span.end()

    def context(self) -> contextvars.Context:
        copied = contextvars.copy_context()
        copied.run(otel_context.attach, trace.set_span_in_context(self._span))
        return copied


class OtelTelemetry(Telemetry):
    enabled = True

    def __init__(
        self, environ: Mapping[str, str], *, warn: Callable[[str], None] | None = None
    ) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        _route_sdk_logs(warn)
        self.capture_content = (environ.get("AGENTCTL_OTEL_CAPTURE_CONTENT") or "").lower() in (
            "1",
            "true",
            "yes",
        )
        named = environ.get("OTEL_SERVICE_NAME") or "service.name=" in (
            environ.get("OTEL_RESOURCE_ATTRIBUTES") or ""
        )
        resource = Resource.create({} if named else {"service.name": "agentctl"})
        self._tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        if _exporter(environ, "OTEL_TRACES_EXPORTER") == "otlp":
            self._tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self._tracer = self._tracer_provider.get_tracer("agentctl")
        self._meter_provider: Any = None
        self._instruments: dict[str, Any] = {}
        if _exporter(environ, "OTEL_METRICS_EXPORTER") == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            reader = PeriodicExportingMetricReader(OTLPMetricExporter())
            self._meter_provider = MeterProvider(
                resource=resource, metric_readers=[reader], shutdown_on_exit=False
            )
            self._meter = self._meter_provider.get_meter("agentctl")

    # -- spans -------------------------------------------------------------------------

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        *,
        kind: str = "internal",
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> Iterator[Span]:
        with self._tracer.start_as_current_span(
            name,
            kind=_KINDS[kind],
            attributes=_clean(attributes),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield _OtelSpan(span)

    def start_span(
        self,
        name: str,
        *,
        attributes: Mapping[str, AttributeValue | None] | None = None,
        links: Sequence[tuple[TraceIds, Mapping[str, AttributeValue]]] = (),
        traceparent: str | None = None,
    ) -> Span:
        parent = (
            TraceContextTextMapPropagator().extract({"traceparent": traceparent})
            if traceparent
            else otel_context.Context()  # a new trace, whatever is current
        )
        span = self._tracer.start_span(
            name,
            context=parent,
            attributes=_clean(attributes),
            links=[_link(ids, link_attributes) for ids, link_attributes in links],
        )
        return _OtelSpan(span)

    def past_span(
        self,
        name: str,
        *,
        start: datetime,
        end: datetime,
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> None:
        span = self._tracer.start_span(
            name, attributes=_clean(attributes), start_time=_nanos(start)
        )
        span.end(end_time=max(_nanos(end), _nanos(start)))

    def current_ids(self) -> TraceIds | None:
        return _ids(trace.get_current_span().get_span_context())

    def traceparent(self) -> str | None:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"

    # -- metrics -----------------------------------------------------------------------

    def _instrument(self, metric: str, histogram: bool) -> Any:
        found = self._instruments.get(metric)
        if found is None:
            unit = _UNITS.get(metric, "1")
            create = self._meter.create_histogram if histogram else self._meter.create_counter
            found = self._instruments[metric] = create(metric, unit=unit)
        return found

    def add(self, metric: str, value: float, attributes: Mapping[str, AttributeValue]) -> None:
        if self._meter_provider is not None:
            self._instrument(metric, False).add(value, dict(attributes))

    def record(self, metric: str, value: float, attributes: Mapping[str, AttributeValue]) -> None:
        if self._meter_provider is not None:
            self._instrument(metric, True).record(value, dict(attributes))

    def shutdown(self) -> None:
        # Flushes the batch of spans and a last collection of metrics to the collector.
        self._tracer_provider.shutdown()
        if self._meter_provider is not None:
            self._meter_provider.shutdown()


class _Warn(logging.Handler):
    def __init__(self, warn: Callable[[str], None]) -> None:
        super().__init__(logging.ERROR)
        self._warn = warn

    def emit(self, record: logging.LogRecord) -> None:
        self._warn(f"telemetry: {record.getMessage()}")


def _route_sdk_logs(warn: Callable[[str], None] | None) -> None:
    """The SDK logs export trouble (an unreachable collector) through ``logging``, which
    would print it to stderr unformatted. Retries are left out; a batch that could not be
    delivered goes to ``warn``, or nowhere."""
    logger = logging.getLogger("opentelemetry")
    logger.propagate = False
    for handler in list(logger.handlers):
        if isinstance(handler, _Warn | logging.NullHandler):
            logger.removeHandler(handler)
    logger.addHandler(_Warn(warn) if warn is not None else logging.NullHandler())


def _exporter(environ: Mapping[str, str], variable: str) -> str:
    names = [n.strip().lower() for n in (environ.get(variable) or "otlp").split(",")]
    return "otlp" if "otlp" in names else "none"


def _link(ids: TraceIds, attributes: Mapping[str, AttributeValue]) -> Link:
    context = SpanContext(
        trace_id=int(ids[0], 16),
        span_id=int(ids[1], 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return Link(context, dict(attributes))
