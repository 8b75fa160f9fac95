"""Observability: the hash-chained audit log, redaction of what is stored, and the
telemetry bridge, whose process-wide switch this package publishes (``request`` the
``--otel`` flag, ``activate`` from the environment, ``shutdown`` to flush) for the command
line to use without reaching into its modules.
"""

from agentctl.observability.telemetry import activate, request, shutdown

__all__ = ["activate", "request", "shutdown"]
