"""The typed records :class:`agentctl.Runtime` reads straight from stored rows, with no
engine or compiler behind them: a command that only reads the store (``runs list``,
``sessions list``) imports this module and neither of those.

:mod:`agentctl.runtime_records` re-exports every one of them beside the records the
engine's operations assemble, so the facade keeps one list of its records; each is the
document the matching command prints with ``--output json`` (``to_json()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic.dataclasses import dataclass as record

from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

__all__ = [
    "AuditCheck",
    "CancelRequest",
    "RunSummary",
    "SessionDetail",
    "SessionSummary",
    "TaskProgress",
]


@record(frozen=True, slots=True, config=CAMEL)
class TaskProgress(CamelRecord):
    done: int
    total: int


@record(frozen=True, slots=True, config=CAMEL)
class RunSummary(CamelRecord):
    """One run of ``runs``/``agentctl runs list``: where it is and how far."""

    run_id: str
    workflow: str
    state: str
    mode: str
    source_run_id: str | None
    created_at: str
    updated_at: str
    tasks: TaskProgress
    waiting_approvals: int


@record(frozen=True, slots=True, config=CAMEL)
class CancelRequest(CamelRecord):
    """What ``cancel`` did: the run's state after it, whether the cancel flag was set,
    and a ``note`` when the run was already finished or another process will stop it."""

    run_id: str
    state: str
    cancel_requested: bool
    note: str | None = omitted_when(None)


@record(frozen=True, slots=True, config=CAMEL)
class SessionSummary(CamelRecord):
    """A recorded provider session (``sessions list``): whose, under which name, and the
    provider's continuation state without its transcript."""

    run_id: str
    task_id: str
    name: str | None
    provider: str
    updated_at: str
    state: Mapping[str, Any]


@record(frozen=True, slots=True, config=CAMEL)
class SessionDetail(SessionSummary):
    """A session with the transcript a later run would continue (``sessions show``)."""

    transcript: Any = None


@record(frozen=True, slots=True, config=CAMEL)
class AuditCheck(CamelRecord):
    """The audit chain's check: how many events, whether every link verifies, and the
    sequence number of the first broken one."""

    events: int
    verified: bool
    broken_at: int | None
