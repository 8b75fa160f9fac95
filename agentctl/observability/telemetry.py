"""The telemetry interface the engine calls: no-op unless OpenTelemetry is enabled.

The engine reports what it does through :func:`active` — spans (run execution, task
attempt, effect, the call inside an effect, approval waits) and metrics — and never
imports OpenTelemetry itself. By default the active bridge is :class:`Telemetry`, whose
methods do nothing and cost a function call. :func:`activate` swaps in the bridge of
:mod:`agentctl.observability.otel` (the official SDK, OTLP over HTTP) when ``--otel`` was
given or the standard ``OTEL_*`` environment variables ask for export; only then is any
``opentelemetry`` module imported.

Span and trace ids are lower-case hex strings: ``(trace_id, span_id)``, 32 and 16 digits.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping

from agentctl.errors import UsageError
from agentctl.observability.spans import AttributeValue, Span, Telemetry, TraceIds

__all__ = [
    "AttributeValue",
    "Span",
    "Telemetry",
    "TraceIds",
    "activate",
    "active",
    "enabled_by",
    "request",
    "shutdown",
]

#: Exporter names this build can use for OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER.
_EXPORTERS = ("otlp", "none")


_active: Telemetry = Telemetry()
_requested = False


def active() -> Telemetry:
    """The bridge every hook reports to (the no-op one until :func:`activate`)."""
    return _active


def request(flag: bool) -> None:
    """Remember ``--otel`` from the command line; nothing is imported here."""
    global _requested
    _requested = _requested or flag


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def enabled_by(environ: Mapping[str, str], flag: bool = False) -> bool:
    """Whether telemetry should be on: ``--otel``, or an OTLP endpoint or an
    ``OTEL_TRACES_EXPORTER`` other than ``none`` in the environment; never with
    ``OTEL_SDK_DISABLED=true``."""
    if _truthy(environ.get("OTEL_SDK_DISABLED")):
        return False
    if flag:
        return True
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        return True
    exporter = (environ.get("OTEL_TRACES_EXPORTER") or "").strip().lower()
    return bool(exporter) and exporter != "none"


def _check_exporters(environ: Mapping[str, str]) -> None:
    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        names = [n.strip().lower() for n in (environ.get(variable) or "").split(",") if n.strip()]
        unknown = [n for n in names if n not in _EXPORTERS]
        if unknown:
            raise UsageError(
                f"{variable}={environ.get(variable)!r}: agentctl exports only over OTLP/HTTP "
                f"(`otlp`) or not at all (`none`), not {', '.join(unknown)}",
                hint=f"set {variable}=otlp (or none), or unset it",
            )


def _installed() -> bool:
    """Whether the SDK and the OTLP/HTTP exporter can be imported (without importing them
    beyond their parent packages)."""
    try:
        return all(
            importlib.util.find_spec(name) is not None
            for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
        )
    except ImportError:
        return False


def activate(environ: Mapping[str, str], *, warn: Callable[[str], None] | None = None) -> Telemetry:
    """Switch to the OpenTelemetry bridge when enabled (see :func:`enabled_by`).

    Idempotent. ``--otel`` without the ``otel`` extra installed is a usage error (exit 2);
    environment variables alone leave telemetry off then, because they are often set for
    every service on a host. ``warn`` receives the SDK's export failures (None: dropped,
    as machine output must keep stderr to its one error document).
    """
    global _active
    if _active.enabled or not enabled_by(environ, _requested):
        return _active
    if not _installed():
        if _requested:
            raise UsageError(
                "--otel needs the OpenTelemetry SDK and OTLP exporter, which are not installed",
                hint="install them with `pip install 'agentctl[otel]'`, or drop --otel",
            )
        return _active
    _check_exporters(environ)
    from agentctl.observability.otel import OtelTelemetry

    _active = OtelTelemetry(environ, warn=warn)
    return _active


def shutdown() -> None:
    """Flush and stop the active bridge; the no-op bridge takes its place again."""
    global _active, _requested
    bridge, _active, _requested = _active, Telemetry(), False
    bridge.shutdown()
