"""The typed records :class:`agentctl.Runtime` reads straight from stored rows, with no
engine or compiler behind them: a command that only reads the store (``runs list``,
``sessions list``) imports this module and neither of those.

:mod:`agentctl.runtime_records` re-exports every one of them beside the records the
engine's operations assemble, so the facade keeps one list of its records; each is the
document the matching command prints with ``--output json`` (``to_json()``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic.dataclasses import dataclass as record

from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

if TYPE_CHECKING:
    from pathlib import Path

    from agentctl.compiler import Plan
    from agentctl.diagnostics import Diagnostic
    from agentctl.scheduling.registry import WorkflowEntry

__all__ = [
    "AuditCheck",
    "CancelRequest",
    "CompiledWorkflow",
    "DoctorCheck",
    "DoctorReport",
    "Explanation",
    "PauseRelease",
    "PausedTask",
    "ProviderCheck",
    "ProviderSmoke",
    "RegisteredWorkflow",
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
class PausedTask(CamelRecord):
    """A task that waits at a pause step (the dashboard's inbox): its run and workflow,
    the step's message, and when it parked (None for a run recorded before that was kept)."""

    run_id: str
    workflow: str
    task_id: str
    message: str | None
    paused_at: str | None


@record(frozen=True, slots=True, config=CAMEL)
class PauseRelease(CamelRecord):
    """What letting a parked run go on past its pause steps recorded: the run, the pause
    tasks released and who released them (audit event ``pause.released``)."""

    run_id: str
    tasks: list[str]
    actor: str


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


@dataclasses.dataclass(frozen=True, slots=True)
class DoctorCheck:
    """One prerequisite ``doctor`` checked: what, on which target, ``ok`` or not, why,
    and the ``fix`` when there is one."""

    check: str
    target: str
    status: str
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"check": self.check, "target": self.target, "status": self.status}
        data["detail"] = self.detail
        if self.fix is not None:
            data["fix"] = self.fix
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DoctorCheck:
        return cls(data["check"], data["target"], data["status"], data["detail"], data.get("fix"))


@dataclasses.dataclass(frozen=True, slots=True)
class DoctorReport:
    """A workflow's prerequisites (``agentctl doctor``); ``ok`` when every check passed."""

    workflow: str
    checks: Sequence[DoctorCheck]
    ok: bool

    def to_json(self) -> dict[str, Any]:
        checks = [check.to_json() for check in self.checks]
        return {"workflow": self.workflow, "checks": checks, "ok": self.ok}


@dataclasses.dataclass(frozen=True, slots=True)
class Explanation:
    """Each variable's resolved value and its source (``agentctl explain``): ``variables``
    is the scope every task shares, ``tasks`` each task definition's own layers (their
    JSON views), ``workspace`` the folder checked when one was given. ``diagnostics`` are
    the warnings found on the way; they are not part of the JSON form."""

    workflow: str
    workflow_digest: str
    plan_digest: str
    variables: Sequence[Mapping[str, Any]]
    tasks: Sequence[Mapping[str, Any]]
    diagnostics: Sequence[Diagnostic] = ()
    workspace: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "workflow": self.workflow,
            "workflowDigest": self.workflow_digest,
            "planDigest": self.plan_digest,
            "variables": list(self.variables),
            "tasks": list(self.tasks),
        }
        if self.workspace is not None:
            data["workspace"] = self.workspace
        return data


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderSmoke:
    """The answer to one tiny live request (``auth check --smoke``, ``providers
    smoke-openai``): how many seconds it took and why the model stopped."""

    seconds: float
    finish_reason: str

    def to_json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "finishReason": self.finish_reason}


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderCheck:
    """A provider a workflow's agent tasks reach, as ``auth check`` reports it: its kind,
    API and capabilities; behind an HTTP ``endpoint``, where its ``credential`` (None when
    it needs none) and ``headers`` come from with their SHA-256, never a value; for a
    ``command`` provider, how the prompt is passed and where its ``env`` comes from; and
    with ``smoke``, the answer to one live request."""

    provider: str
    kind: str
    api: str | None
    capabilities: Sequence[str]
    endpoint: str | None = None
    credential: Mapping[str, Any] | None = None
    headers: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    command: str | None = None
    prompt_via: str | None = None
    env: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    smoke: ProviderSmoke | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "provider": self.provider,
            "kind": self.kind,
            "api": self.api,
            "capabilities": list(self.capabilities),
        }
        if self.endpoint is not None:
            data["endpoint"] = self.endpoint
            data["credential"] = None if self.credential is None else dict(self.credential)
            data["headers"] = {name: dict(source) for name, source in self.headers.items()}
        if self.command is not None:
            data["command"] = self.command
            data["promptVia"] = self.prompt_via
            data["env"] = {name: dict(source) for name, source in self.env.items()}
        if self.smoke is not None:
            data["smoke"] = self.smoke.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProviderCheck:
        smoke = data.get("smoke")
        return cls(
            data["provider"],
            data["kind"],
            data.get("api"),
            data["capabilities"],
            endpoint=data.get("endpoint"),
            credential=data.get("credential"),
            headers=data.get("headers") or {},
            command=data.get("command"),
            prompt_via=data.get("promptVia"),
            env=data.get("env") or {},
            smoke=None if smoke is None else ProviderSmoke(smoke["seconds"], smoke["finishReason"]),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class CompiledWorkflow:
    """A workflow file compiled with its variables (``check``, ``plan``): the ``plan``, the
    warnings found on the way, the ``--input`` overrides checked against its declared
    inputs with how each was read (text or JSON), and, when asked for, how each process
    task will be isolated (task id -> ``{isolation, sandbox?, text}``)."""

    plan: Plan
    diagnostics: Sequence[Diagnostic] = ()
    input_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    inputs_read_as: Mapping[str, str] = dataclasses.field(default_factory=dict)
    isolation: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class RegisteredWorkflow:
    """A workflow of the registry (``workflows list``/``show``): its entry (name, file,
    digest, description, problem) and its newest run (``runId``, ``state``,
    ``createdAt``), None when it never ran."""

    entry: WorkflowEntry
    last_run: Mapping[str, Any] | None

    @property
    def name(self) -> str:
        return self.entry.name

    def to_json(self) -> dict[str, Any]:
        last = None if self.last_run is None else dict(self.last_run)
        return {**self.entry.to_json(), "lastRun": last}


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowRegistry:
    """The registered workflows, and the directories searched for them in order."""

    workflows: Sequence[RegisteredWorkflow]
    search_path: Sequence[Path]
