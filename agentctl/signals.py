"""How a task body tells the scheduler why it stopped.

The engine's action bodies and the tools below it (MCP, A2A, extensions) raise these, so
they live on the bottom floor (docs/architecture.md): a tool never imports the engine.
They never reach the CLI: the scheduler turns each into a task transition, a paused or
blocked run, or a fresh attempt.
"""

from __future__ import annotations

from typing import Any

from pydantic.dataclasses import dataclass

from agentctl.errors import AgentctlError, PolicyDeniedError, TaskError
from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

__all__ = [
    "ApprovalPending",
    "EffectBlocked",
    "FailureRecord",
    "FreshAttempt",
    "OutcomeUnknown",
    "PAUSE_PREFIX",
    "TaskFailure",
    "as_task_failure",
]

# Local I/O failures: the tool errors upstream retries, our `transient` retry class.
RETRYABLE_TOOL_CODES = frozenset(
    {
        "file.not_found",
        "file.too_large",
        "file.not_utf8",
        "file.io_error",
        "process.not_found",
        "process.spawn_failed",
    }
)


@dataclass(frozen=True, slots=True, config=CAMEL)
class FailureRecord(CamelRecord):
    """A failed attempt as its task row stores it: the flags and details only when set."""

    code: str
    message: str
    retryable: bool = omitted_when(False)
    permanent: bool = omitted_when(False)
    details: Any = omitted_when(None)


class TaskFailure(Exception):
    """The current attempt failed. ``stops_run`` overrides ``failure: continue``.

    ``retryable`` marks a transient failure (what upstream retries); ``permanent`` a failure
    no retry policy may retry (``builtin.fail`` with ``retry: false``, a timed-out attempt
    that left an effect uncertain).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "task.failed",
        retryable: bool = False,
        stops_run: bool = False,
        details: Any = None,
        permanent: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = str(code)
        self.retryable = retryable
        self.stops_run = stops_run
        self.details = details
        self.permanent = permanent

    def to_json(self) -> dict[str, Any]:
        """The task row's ``error`` (:class:`FailureRecord`)."""
        record = FailureRecord(
            self.code, self.message, self.retryable, self.permanent, self.details
        )
        return record.to_json()


class FreshAttempt(Exception):
    """An effect of this attempt was reconciled not applied/compensated: start a new one."""

    def __init__(self, effect_id: str) -> None:
        super().__init__(effect_id)
        self.effect_id = effect_id


class EffectBlocked(Exception):
    """An effect's outcome is unknown; the run cannot pass it until it is reconciled."""

    def __init__(self, effect_id: str, operation: str) -> None:
        super().__init__(effect_id)
        self.effect_id = effect_id
        self.operation = operation


PAUSE_PREFIX = "pause:"


class ApprovalPending(Exception):
    """An effect or question waits for a person; the run parks (exit 3).

    A ``builtin.pause`` step parks the same way with the id ``pause:<task id>`` (no approval
    record: ``agentctl resume`` itself continues it) and its message.
    """

    def __init__(
        self, approval_id: str, kind: str = "approval", message: str | None = None
    ) -> None:
        super().__init__(approval_id)
        self.approval_id = approval_id
        self.kind = kind
        self.message = message

    def task_error(self) -> dict[str, Any] | None:
        """What the parked task row shows while it waits (only a pause says something)."""
        if self.kind != "pause":
            return None
        return {"code": "task.paused", "message": self.message or "paused"}


def as_task_failure(error: AgentctlError) -> TaskFailure:
    """Map a tool's error to a task failure with the retry rule of docs/retries-and-timeouts.md."""
    if isinstance(error, PolicyDeniedError):
        message = error.message
        if not message.startswith("policy denied effect"):
            message = f"policy denied effect: {message}"
        return TaskFailure(message, code=error.code)
    retryable = isinstance(error, TaskError) and error.code in RETRYABLE_TOOL_CODES
    details = {"hint": error.hint} if error.hint else None
    return TaskFailure(error.message, code=error.code, retryable=retryable, details=details)


class OutcomeUnknown(Exception):
    """Raised by a dispatch whose outcome cannot be known (timeout, connection lost after
    send): the effect becomes ``uncertain``."""

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
