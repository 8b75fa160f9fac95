"""What the Python API returns: :class:`RunResult`, and the :class:`EventSink` it reports to.

Both are exported from ``agentctl`` (docs/python-api.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentctl.store.states import RunState

if TYPE_CHECKING:
    from agentctl.engine.run.outcome import RunOutcome

__all__ = ["Approver", "EventSink", "RunResult"]

Approver = Callable[[dict[str, Any]], Awaitable[bool]]
"""Decides an approval in-process: given the request, returns True to approve."""


class EventSink(Protocol):
    """Receives ``(kind, data)``: ``created`` when a run is created, ``started`` when this
    process begins executing it (``tasks``: each task's state, in plan order),
    ``task.started`` when a task attempt begins (``taskId``, ``attempt``), ``task`` for
    each committed task transition and ``run`` when the run stops; ``data`` always
    carries ``runId``."""

    def __call__(self, kind: str, data: dict[str, Any], /) -> None: ...


@dataclass(frozen=True)
class RunResult:
    """Where a run stopped: ``state`` is a :class:`RunState` (succeeded, failed, paused or
    cancelled; it compares equal to those strings).

    ``paused`` means a person must act: answer ``pending_approvals`` (approve, reject or
    answer), reconcile ``uncertain_effects``, or just resume after ``paused_tasks``
    (``builtin.pause``); then call :meth:`Runtime.resume`.
    """

    run_id: str
    state: RunState
    output: Any = None
    error: dict[str, Any] | None = None
    pending_approvals: list[str] = dataclasses.field(default_factory=list)
    paused_tasks: list[str] = dataclasses.field(default_factory=list)
    uncertain_effects: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    compensation: RunResult | None = None
    """The automatic compensation run that followed a failure (``onFailure: automatic``)."""
    changed_files: list[dict[str, Any]] | None = None
    """For ``roll(dry_run=True)``: the files the run changed in its throwaway copy."""

    @property
    def ok(self) -> bool:
        return self.state is RunState.SUCCEEDED

    @classmethod
    def from_outcome(cls, outcome: RunOutcome, **extra: Any) -> RunResult:
        return cls(
            run_id=outcome.run_id,
            state=RunState(outcome.state),
            output=outcome.output,
            error=outcome.error,
            pending_approvals=outcome.pending_approvals,
            paused_tasks=outcome.paused_tasks,
            uncertain_effects=outcome.uncertain_effects,
            **extra,
        )

    def to_json(self) -> dict[str, Any]:
        """The run document that ``agentctl roll --output json`` prints (the engine's
        ``RunDocument``; the compensation run is not part of it)."""
        from agentctl.engine.run.outcome import RunDocument

        document = RunDocument(
            self.run_id,
            self.state.value,
            self.output,
            self.error,
            self.pending_approvals,
            self.paused_tasks,
            self.uncertain_effects,
            self.changed_files,
        )
        return document.to_json()
