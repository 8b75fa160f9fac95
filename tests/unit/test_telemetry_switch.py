"""When telemetry turns on, and that the default bridge records nothing."""

from __future__ import annotations

import pytest

from agentctl import tracecontext
from agentctl.errors import UsageError
from agentctl.observability import telemetry


@pytest.mark.parametrize(
    ("environ", "flag", "enabled"),
    [
        ({}, False, False),
        ({}, True, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, False, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, False, True),
        ({"OTEL_TRACES_EXPORTER": "none"}, False, False),
        ({"OTEL_SERVICE_NAME": "svc"}, False, False),  # naming a service exports nothing
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, False, False),
        ({"OTEL_SDK_DISABLED": "true"}, True, False),
    ],
)
def test_enabled_by(environ: dict[str, str], flag: bool, enabled: bool) -> None:
    assert telemetry.enabled_by(environ, flag) is enabled


def test_the_default_bridge_is_off_and_propagates_nothing() -> None:
    bridge = telemetry.active()
    assert not bridge.enabled
    with bridge.span("anything") as span:
        assert span.ids is None
        assert bridge.current_ids() is None
        assert bridge.traceparent() is None
    assert tracecontext.headers() == {}
    assert tracecontext.with_environment({"A": "1"}) == {"A": "1"}


def test_activation_refuses_an_unknown_exporter_and_stays_off() -> None:
    with pytest.raises(UsageError, match="OTEL_METRICS_EXPORTER"):
        telemetry.activate({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "prometheus"})
    assert not telemetry.active().enabled


def test_propagating_sets_and_restores_the_outgoing_context() -> None:
    value = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracecontext.propagating(value):
        assert tracecontext.headers() == {"traceparent": value}
        assert tracecontext.with_environment({}) == {"TRACEPARENT": value}
    assert tracecontext.outgoing() is None
