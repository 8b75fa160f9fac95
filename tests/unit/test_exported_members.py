"""The public Python API: what ``agentctl`` exports is pinned, complete and cheap to import."""

from __future__ import annotations

import inspect
import subprocess
import sys

import agentctl

PUBLIC = [
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


def test_all_is_pinned() -> None:
    # Adding or removing a public name is a deliberate change: update PUBLIC and
    # docs/python-api.md together.
    assert agentctl.__all__ == PUBLIC


def test_exported_members() -> None:
    """Like httpx's test: every public attribute is in __all__, and every name resolves."""
    members = {
        name
        for name, member in inspect.getmembers(agentctl)
        if not name.startswith("_") and not inspect.ismodule(member)
    }
    names = set(agentctl.__all__) - {"__version__"}
    assert members == names
    for name in names:
        member = getattr(agentctl, name)
        assert getattr(member, "__module__", "").startswith("agentctl"), name


def test_unknown_names_raise_attribute_error() -> None:
    try:
        agentctl.Nope  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "Nope" in str(exc)
    else:
        raise AssertionError("agentctl.Nope resolved")


def test_the_errors_are_the_ones_raised() -> None:
    from agentctl import errors

    assert agentctl.NotFoundError is errors.NotFoundError
    assert agentctl.ErrorCode.STORE_NOT_FOUND == errors.NotFoundError.default_code


def test_import_and_facade_stay_light() -> None:
    """``import agentctl`` and naming the facade load neither SQLAlchemy nor httpx."""
    probe = (
        "import sys\n"
        "import agentctl\n"
        "agentctl.Runtime('x.db'); agentctl.RunResult; agentctl.ErrorCode; agentctl.UsageError\n"
        "agentctl.RunState; agentctl.TaskState\n"
        "heavy = ('sqlalchemy', 'alembic', 'httpx', 'numpy')\n"
        "print('HEAVY=' + ','.join(sorted(m for m in heavy if m in sys.modules)))\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY=\n" in result.stdout
