"""A task's retry policy: which failed attempts get another one, and the wait before it.

The rule, deliberately broader than upstream's (which retries only provider 429/5xx and
local I/O errors): a *confirmed* failure is what a retry policy is for, so every failed
attempt whose outcome is known may be retried — a non-zero exit, a failed assertion or
output contract, a tool's error result, a 4xx answer. What is never retried:

- an attempt whose effect is *uncertain* (it may have happened; the run blocks instead, or,
  after a task timeout, the attempt fails and stays failed until an operator reconciles);
- failures a new attempt cannot change: policy denials, budget exhaustion, a rejected
  approval, template and input errors, missing isolation (see ``NEVER_RETRIED``);
- a failure the task declared final: ``builtin.fail`` with ``retry: false``, or a process
  (``builtin.shell.exec``, ``extension.process``) exiting with ``PERMANENT_EXIT_CODE``.

``retryOn`` narrows the rule to the listed error codes (a trailing ``*`` matches any
suffix) and classes: ``transient`` (what upstream retries) and ``timeout`` (``task.timeout``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from agentctl.compiler.task_parts import RetryPolicy
from agentctl.signals import TaskFailure

__all__ = [
    "NEVER_RETRIED",
    "PERMANENT_EXIT_CODE",
    "RETRY_CLASSES",
    "not_retried_reason",
    "retry_history",
    "wait_seconds",
]

#: A process that exits with this code says "do not try again" (sysexits' EX_CONFIG).
PERMANENT_EXIT_CODE = 78

#: Failures a new attempt cannot change: retrying them would repeat the same refusal.
NEVER_RETRIED = frozenset(
    {
        "action.unsupported",
        "approval.rejected",
        "budget.exceeded",
        "input.invalid",
        "isolation.unavailable",
        "memory.undeclared_write",
        "plan.unknown_kind",
        "secret.unresolved",
        "secret.unsupported",
        "template.error",
    }
)

RETRY_CLASSES = frozenset({"transient", "timeout"})

_PROCESS_FAILURES = frozenset({"subprocess.failed", "extension.failed"})


def _detail(failure: TaskFailure, name: str) -> Any:
    details = failure.details
    return details.get(name) if isinstance(details, Mapping) else None


def _matches(failure: TaskFailure, entry: str) -> bool:
    if entry == "transient":
        return failure.retryable
    if entry == "timeout":
        return failure.code == "task.timeout"
    return fnmatchcase(failure.code, entry)


def not_retried_reason(policy: RetryPolicy, failure: TaskFailure) -> str | None:
    """Why this failed attempt gets no other attempt, or None when the policy retries it.

    The attempt budget (``maxAttempts``) is the caller's to count.
    """
    if failure.permanent:
        return "the failure is declared final"
    if failure.stops_run:
        return "the failure stops the run"
    if failure.code in NEVER_RETRIED or failure.code.startswith("policy."):
        return f"`{failure.code}` would fail the same way again"
    if failure.code == "task.timeout" and _detail(failure, "retrySafe") is False:
        return "an effect of the timed-out attempt is uncertain"
    if failure.code in _PROCESS_FAILURES and _detail(failure, "exitCode") == PERMANENT_EXIT_CODE:
        return f"the process exited with {PERMANENT_EXIT_CODE} (final failure)"
    if policy.retry_on is not None and not any(_matches(failure, e) for e in policy.retry_on):
        return f"`{failure.code}` is not in retryOn"
    return None


def _unit(seed: str) -> float:
    """A number in [0, 1) fixed by ``seed``: the same run waits the same on every replay."""
    digest = hashlib.sha256(seed.encode()).digest()
    return int.from_bytes(digest[:8], "big") / float(1 << 64)


def wait_seconds(
    policy: RetryPolicy, *, retry_number: int, seed: str, failure: TaskFailure
) -> float:
    """The wait before retry ``retry_number`` (1 for the second attempt).

    ``backoffMs`` is a fixed wait; ``backoff`` is fixed (``initialMs``) or exponential
    (``initialMs * multiplier^(n-1)``), capped at ``maxMs``, minus up to ``jitter`` of it.
    A provider's Retry-After hint lengthens the wait, never shortens it; 300 s at most.
    """
    backoff = policy.backoff
    if backoff is None:
        delay_ms = float(policy.backoff_ms)
    else:
        delay_ms = float(backoff.initial_ms)
        if backoff.kind == "exponential":
            delay_ms *= backoff.multiplier ** max(0, retry_number - 1)
        delay_ms = min(delay_ms, float(backoff.max_ms))
        if backoff.jitter:
            delay_ms -= delay_ms * backoff.jitter * _unit(seed)
    hint = failure.details.get("retryAfterSeconds") if isinstance(failure.details, dict) else None
    seconds = max(delay_ms / 1000.0, float(hint or 0))
    return min(seconds, 300.0)


def retry_history(events: Iterable[Any]) -> list[dict[str, Any]]:
    """The ``task.retry_scheduled`` audit events of a run, as ``inspect`` shows them."""
    history = []
    for event in events:
        if event.kind != "task.retry_scheduled":
            continue
        payload = event.payload if isinstance(event.payload, Mapping) else {}
        history.append(
            {
                "taskId": event.task_id,
                "failedAttempt": payload.get("failedAttempt"),
                "nextAttempt": payload.get("nextAttempt"),
                "error": payload.get("error"),
                "waitMs": payload.get("waitMs"),
                "at": event.created_at.isoformat(),
            }
        )
    return history
