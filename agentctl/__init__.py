"""agentctl: run AI-agent workflows durably.

The public Python API is what this package exports (``__all__``), documented in
docs/python-api.md::

    import agentctl

    result = agentctl.Runtime("runs.db").roll("release.workflow.yaml", inputs={"n": 2})

Everything else (``agentctl.engine``, ``agentctl.store``, ``agentctl.cli`` …) is internal
and may change between releases. Names load on first use, so ``import agentctl`` (and
``agentctl --help``) import neither SQLAlchemy nor httpx.
"""

import importlib as _importlib
import typing as _typing

from agentctl.version import __version__

if _typing.TYPE_CHECKING:
    from agentctl.error_codes import ErrorCode
    from agentctl.errors import (
        AgentctlError,
        BlockedError,
        Cancelled,
        NewerFormatError,
        NewerSchemaError,
        NotFoundError,
        OwnershipLostError,
        PausedError,
        PersistenceError,
        PolicyDeniedError,
        ProviderError,
        RunFailedError,
        StateConflictError,
        TaskError,
        UsageError,
        ValidationError,
    )
    from agentctl.results import EventSink, RunResult
    from agentctl.runtime import RecoveryRequest, Runtime, VersionInfo
    from agentctl.runtime_records import (
        Approval,
        ApprovalDecision,
        AuditCheck,
        AuditEvent,
        AuditLog,
        CancelRequest,
        ChainReport,
        CompensationPlan,
        CompiledWorkflow,
        Conclusion,
        DatabaseCheck,
        DatabaseStats,
        DbMigration,
        DoctorCheck,
        DoctorReport,
        EffectDetail,
        EffectRecord,
        EncryptionInventory,
        EncryptionKey,
        EncryptionMigration,
        Explanation,
        LegacyRunUpgrade,
        LegacyRunUpgradeAnalysis,
        LegacyTaskUpgradeAnalysis,
        NextStep,
        PausedTask,
        PauseRelease,
        ProviderCheck,
        ProviderSmoke,
        Reconciliation,
        RecoveryPlan,
        RemoteContinuation,
        RemoteTask,
        RunLook,
        RunRecap,
        RunReport,
        RunSummary,
        RunTotals,
        SealedColumn,
        SessionDetail,
        SessionSummary,
        StoredPlan,
        TaskLook,
        TaskProgress,
        TaskTotals,
        TracedEffect,
    )
    from agentctl.runtime_scheduling import (
        DaemonEvent,
        DaemonStop,
        DaemonTick,
        ExitedRun,
        MonitorObservation,
        MonitorReport,
        ScheduleFiring,
        ScheduleRemoval,
        ScheduleReport,
    )
    from agentctl.store.states import ApprovalState, EffectState, RunState, TaskState

__all__ = [
    "__version__",
    "AgentctlError",
    "Approval",
    "ApprovalDecision",
    "ApprovalState",
    "AuditCheck",
    "AuditEvent",
    "AuditLog",
    "BlockedError",
    "CancelRequest",
    "Cancelled",
    "ChainReport",
    "CompensationPlan",
    "CompiledWorkflow",
    "Conclusion",
    "DaemonEvent",
    "DaemonStop",
    "DaemonTick",
    "DatabaseCheck",
    "DatabaseStats",
    "DbMigration",
    "EncryptionInventory",
    "EncryptionKey",
    "EncryptionMigration",
    "SealedColumn",
    "DoctorCheck",
    "DoctorReport",
    "EffectDetail",
    "EffectRecord",
    "EffectState",
    "ErrorCode",
    "EventSink",
    "ExitedRun",
    "Explanation",
    "LegacyRunUpgrade",
    "LegacyRunUpgradeAnalysis",
    "LegacyTaskUpgradeAnalysis",
    "MonitorObservation",
    "MonitorReport",
    "NewerFormatError",
    "NewerSchemaError",
    "NextStep",
    "PauseRelease",
    "PausedTask",
    "NotFoundError",
    "OwnershipLostError",
    "PausedError",
    "PersistenceError",
    "PolicyDeniedError",
    "ProviderCheck",
    "ProviderError",
    "ProviderSmoke",
    "Reconciliation",
    "RecoveryPlan",
    "RecoveryRequest",
    "RemoteContinuation",
    "RemoteTask",
    "RunFailedError",
    "RunLook",
    "RunRecap",
    "RunReport",
    "RunResult",
    "RunState",
    "RunSummary",
    "RunTotals",
    "Runtime",
    "ScheduleFiring",
    "ScheduleRemoval",
    "ScheduleReport",
    "SessionDetail",
    "SessionSummary",
    "StateConflictError",
    "StoredPlan",
    "TaskError",
    "TaskLook",
    "TaskProgress",
    "TaskState",
    "TaskTotals",
    "TracedEffect",
    "UsageError",
    "ValidationError",
    "VersionInfo",
]

# The typed records Runtime returns (docs/python-api.md, "Typed records").
_RECORDS = (
    "Approval",
    "ApprovalDecision",
    "AuditCheck",
    "AuditEvent",
    "AuditLog",
    "CancelRequest",
    "ChainReport",
    "CompensationPlan",
    "CompiledWorkflow",
    "Conclusion",
    "DatabaseCheck",
    "DatabaseStats",
    "DbMigration",
    "DoctorCheck",
    "DoctorReport",
    "EffectDetail",
    "EffectRecord",
    "EncryptionInventory",
    "EncryptionKey",
    "EncryptionMigration",
    "Explanation",
    "LegacyRunUpgrade",
    "LegacyRunUpgradeAnalysis",
    "LegacyTaskUpgradeAnalysis",
    "NextStep",
    "PauseRelease",
    "PausedTask",
    "ProviderCheck",
    "ProviderSmoke",
    "Reconciliation",
    "RecoveryPlan",
    "RemoteContinuation",
    "RemoteTask",
    "RunLook",
    "RunRecap",
    "RunReport",
    "RunSummary",
    "RunTotals",
    "SealedColumn",
    "SessionDetail",
    "SessionSummary",
    "StoredPlan",
    "TaskLook",
    "TaskProgress",
    "TaskTotals",
    "TracedEffect",
)

# The typed records of Runtime's scheduling half (docs/python-api.md, "Schedules, monitors
# and the daemon").
_SCHEDULING = (
    "DaemonEvent",
    "DaemonStop",
    "DaemonTick",
    "ExitedRun",
    "MonitorObservation",
    "MonitorReport",
    "ScheduleFiring",
    "ScheduleRemoval",
    "ScheduleReport",
)

# Where each exported name lives; imported the first time it is used.
_HOMES = {
    "ErrorCode": "agentctl.error_codes",
    "EventSink": "agentctl.results",
    "RunResult": "agentctl.results",
    "RecoveryRequest": "agentctl.runtime_recovery",
    "Runtime": "agentctl.runtime",
    "VersionInfo": "agentctl.runtime",
    **dict.fromkeys(_RECORDS, "agentctl.runtime_records"),
    **dict.fromkeys(_SCHEDULING, "agentctl.runtime_scheduling"),
    **{name: "agentctl.store.states" for name in __all__ if name.endswith("State")},
    **{
        name: "agentctl.errors" for name in __all__ if name.endswith("Error") or name == "Cancelled"
    },
}


def __getattr__(name: str) -> _typing.Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentctl' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
