"""The one place where the commands agentctl suggests as a next step are spelled.

Every hint that names a command builds it here, so a command's spelling (its arguments,
its placeholders) is written once and a test can run each suggestion as printed. The
placeholders a person fills in are upper case: ``TEXT`` (a reason), ``VALUE`` (an answer,
JSON or a string) and ``TASK`` (a task id); ``applied|not-applied`` offers a choice.

Kept free of imports from the rest of agentctl: the store, the engine and the CLI all use
it.
"""

from __future__ import annotations

import shlex

__all__ = [
    "answer",
    "approve",
    "cancel",
    "compensate",
    "inspect",
    "quoted",
    "reconcile",
    "reconcile_list",
    "reject",
    "repair",
    "resume",
    "retry_failed",
]


def _arg(value: str) -> str:
    return shlex.quote(value)


def quoted(command: str) -> str:
    """A command as it appears inside a sentence: in backticks."""
    return f"`{command}`"


def resume(run_id: str) -> str:
    return f"agentctl resume {_arg(run_id)}"


def inspect(run_id: str) -> str:
    return f"agentctl inspect {_arg(run_id)}"


def cancel(run_id: str) -> str:
    return f"agentctl cancel {_arg(run_id)}"


def approve(approval_id: str) -> str:
    return f"agentctl approvals approve {_arg(approval_id)} --reason TEXT"


def reject(approval_id: str) -> str:
    return f"agentctl approvals reject {_arg(approval_id)} --reason TEXT"


def answer(approval_id: str) -> str:
    return f"agentctl approvals answer {_arg(approval_id)} VALUE"


def reconcile(effect_id: str) -> str:
    return f"agentctl reconcile {_arg(effect_id)} --status applied|not-applied --reason TEXT"


def reconcile_list(run_id: str | None = None) -> str:
    return "agentctl reconcile --list" + (f" {_arg(run_id)}" if run_id else "")


def retry_failed(workflow_file: str, run_id: str) -> str:
    return f"agentctl retry {_arg(workflow_file)} {_arg(run_id)} --failed"


def repair(workflow_file: str, run_id: str) -> str:
    return f"agentctl repair {_arg(workflow_file)} {_arg(run_id)}"


def compensate(run_id: str) -> str:
    return f"agentctl compensate {_arg(run_id)}"
