"""One exception hierarchy for agentctl; every error carries a stable code and an exit code.

    AgentctlError                      (exit code on the class, stable ``code`` string)
    ├── UsageError                     2  bad flags, bad --input JSON, unreadable files
    ├── ValidationError                2  workflow diagnostics (carries the diagnostics)
    ├── PausedError                    3  run parked for an approval or a question
    ├── BlockedError                   3  uncertain effect, blocked retry/repair/compensation plan
    ├── RunFailedError                 4  task failure, policy denial, budget, deadline
    │   ├── TaskError                  4  one task failed (bad input, non-zero exit, assertion)
    │   └── PolicyDeniedError          4  policy denied an effect (path, process, tool, network)
    ├── PersistenceError               5  database cannot be opened or migrated, corrupt state
    │   ├── NewerSchemaError           5  database written by a newer agentctl
    │   ├── NewerFormatError           5  a record whose format version is newer than the code
    │   ├── NotFoundError              5  unknown run / effect / artifact id
    │   ├── StateConflictError         5  a record was not in the state this writer expected
    │   └── OwnershipLostError         5  another process took the run over (stale fencing token)
    └── ProviderError                  6  credentials unresolvable, provider/protocol errors

    Cancelled (BaseException)        130  SIGINT, SIGTERM, `agentctl cancel`, --timeout-seconds

Cancellation derives from ``BaseException`` so that no ``except Exception`` below the CLI
swallows it. Nothing below ``agentctl/cli`` calls ``sys.exit``: the CLI maps these classes
to exit codes at one boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Protocol

from agentctl.error_codes import ErrorCode

__all__ = [
    "EXIT_BLOCKED",
    "EXIT_CANCELLED",
    "EXIT_OK",
    "EXIT_PERSISTENCE",
    "EXIT_PROVIDER",
    "EXIT_RUN_FAILED",
    "EXIT_USAGE",
    "AgentctlError",
    "BlockedError",
    "Cancelled",
    "Finding",
    "NewerFormatError",
    "NewerSchemaError",
    "NotFoundError",
    "PausedError",
    "PersistenceError",
    "OwnershipLostError",
    "PolicyDeniedError",
    "ProviderError",
    "RunFailedError",
    "Severity",
    "StateConflictError",
    "TaskError",
    "UsageError",
    "ValidationError",
]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BLOCKED = 3
EXIT_RUN_FAILED = 4
EXIT_PERSISTENCE = 5
EXIT_PROVIDER = 6
EXIT_CANCELLED = 130


Severity = Literal["error", "warning", "info"]


class Finding(Protocol):
    """A located finding an error reports; :class:`agentctl.diagnostics.Diagnostic` is the
    one kind. This module names it by its shape rather than importing it: a diagnostic is a
    typed record, and the typed-record base raises the errors of this module, so an import
    (even a type-only one) would close a cycle between them (docs/architecture.md)."""

    @property
    def code(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def message(self) -> str: ...
    @property
    def file(self) -> str | None: ...
    @property
    def line(self) -> int | None: ...
    @property
    def column(self) -> int | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def help(self) -> str | None: ...
    def location(self) -> str: ...
    def to_json(self) -> dict[str, Any]: ...


class AgentctlError(Exception):
    """Base of every expected error. ``message`` names the thing; ``hint`` the next step."""

    exit_code: ClassVar[int] = EXIT_RUN_FAILED
    default_code: ClassVar[ErrorCode] = ErrorCode.AGENTCTL_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        hint: str | None = None,
        run_id: str | None = None,
        diagnostics: Sequence[Finding] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        # A plain string (an ErrorCode member is one), so an error reads the same either way.
        self.code = str(code or self.default_code)
        self.hint = hint
        self.run_id = run_id
        self.diagnostics: list[Finding] = list(diagnostics)

    def __str__(self) -> str:
        return self.message


class UsageError(AgentctlError):
    exit_code = EXIT_USAGE
    default_code = ErrorCode.CLI_USAGE


class ValidationError(AgentctlError):
    exit_code = EXIT_USAGE
    default_code = ErrorCode.WORKFLOW_INVALID


class PausedError(AgentctlError):
    exit_code = EXIT_BLOCKED
    default_code = ErrorCode.RUN_PAUSED


class BlockedError(AgentctlError):
    exit_code = EXIT_BLOCKED
    default_code = ErrorCode.RUN_BLOCKED


class RunFailedError(AgentctlError):
    exit_code = EXIT_RUN_FAILED
    default_code = ErrorCode.RUN_FAILED


class TaskError(RunFailedError):
    """A task failed for a reason of its own; inside a run it fails the task, not the run."""

    default_code = ErrorCode.TASK_FAILED


class PolicyDeniedError(RunFailedError):
    default_code = ErrorCode.POLICY_DENIED


class PersistenceError(AgentctlError):
    exit_code = EXIT_PERSISTENCE
    default_code = ErrorCode.STORE_ERROR


class NewerSchemaError(PersistenceError):
    default_code = ErrorCode.STORE_NEWER_SCHEMA


class NewerFormatError(PersistenceError):
    default_code = ErrorCode.STORE_NEWER_FORMAT


class NotFoundError(PersistenceError):
    default_code = ErrorCode.STORE_NOT_FOUND


class StateConflictError(PersistenceError):
    """A conditional state change found the record in another state: another process
    changed it first. Nothing was written."""

    default_code = ErrorCode.STORE_STATE_CONFLICT


class OwnershipLostError(PersistenceError):
    """The run was taken over by another process; this owner's writes are refused."""

    default_code = ErrorCode.RUN_OWNERSHIP_LOST


class ProviderError(AgentctlError):
    exit_code = EXIT_PROVIDER
    default_code = ErrorCode.PROVIDER_ERROR


class Cancelled(BaseException):  # noqa: N818 - a signal, not an error
    """Raised when a run is cancelled; a ``BaseException`` so broad handlers let it pass."""

    exit_code: ClassVar[int] = EXIT_CANCELLED
    code: ClassVar[str] = "run.cancelled"

    def __init__(
        self, reason: str = "cancelled", *, run_id: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.run_id = run_id
        self.hint = hint
