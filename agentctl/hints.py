"""The one place where the commands agentctl suggests as a next step are spelled.

Every hint that names a command builds it here, so a command's spelling (its arguments,
its placeholders) is written once and a test can run each suggestion as printed. The
placeholders a person fills in are upper case: ``TEXT`` (a reason), ``VALUE`` (an answer,
JSON or a string) and ``TASK`` (a task id); ``applied|not-applied`` offers a choice.

When the command that prints a hint was given its database with ``--db``, every suggested
command carries the same ``--db`` (set once per invocation with :func:`use_database`), so it
works when pasted; a database chosen by ``AGENTCTL_DB`` or the default needs no option.

Kept free of imports from the rest of agentctl but the foundation's redaction: the store,
the engine and the CLI all use it.
"""

from __future__ import annotations

import os
import shlex
from contextvars import ContextVar

from agentctl.redaction import masked_url

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
    "use_database",
]

_database: ContextVar[str | None] = ContextVar("agentctl_hint_database", default=None)


def use_database(path: str | None) -> None:
    """The ``--db`` this invocation was given (None: the default or ``AGENTCTL_DB``)."""
    _database.set(path)


def _on_db(command: str) -> str:
    path = _database.get()
    # A URL's password never appears in a suggestion (it is shown as ***): keep it in
    # PGPASSWORD or ~/.pgpass, where the suggested command finds it (docs/postgresql.md).
    return f"{command} --db {shlex.quote(masked_url(path))}" if path else command


def _arg(value: str) -> str:
    return shlex.quote(value)


def quoted(command: str) -> str:
    """A command as it appears inside a sentence: in backticks."""
    return f"`{command}`"


def resume(run_id: str) -> str:
    return _on_db(f"agentctl resume {_arg(run_id)}")


def inspect(run_id: str) -> str:
    return _on_db(f"agentctl inspect {_arg(run_id)}")


def cancel(run_id: str) -> str:
    return _on_db(f"agentctl cancel {_arg(run_id)}")


def approve(approval_id: str) -> str:
    return _on_db(f"agentctl approvals approve {_arg(approval_id)} --reason TEXT")


def reject(approval_id: str) -> str:
    return _on_db(f"agentctl approvals reject {_arg(approval_id)} --reason TEXT")


def answer(approval_id: str) -> str:
    return _on_db(f"agentctl approvals answer {_arg(approval_id)} VALUE")


def reconcile(effect_id: str) -> str:
    return _on_db(
        f"agentctl reconcile {_arg(effect_id)} --status applied|not-applied --reason TEXT"
    )


def reconcile_list(run_id: str | None = None) -> str:
    return _on_db("agentctl reconcile --list" + (f" {_arg(run_id)}" if run_id else ""))


def _in_workspace(workflow_file: str, workspace: str | None) -> str:
    """`` --workspace W`` when the run worked somewhere other than its workflow file's
    folder: the derived run defaults to the source's workspace anyway, and the printed
    command says where it will work."""
    if not workspace:
        return ""
    folder = os.path.dirname(os.path.abspath(workflow_file))
    if os.path.abspath(workspace) == folder:
        return ""
    return f" --workspace {_arg(workspace)}"


def retry_failed(workflow_file: str, run_id: str, workspace: str | None = None) -> str:
    return _on_db(
        f"agentctl retry {_arg(workflow_file)} {_arg(run_id)} --failed"
        + _in_workspace(workflow_file, workspace)
    )


def repair(workflow_file: str, run_id: str, workspace: str | None = None) -> str:
    return _on_db(
        f"agentctl repair {_arg(workflow_file)} {_arg(run_id)}"
        + _in_workspace(workflow_file, workspace)
    )


def compensate(run_id: str) -> str:
    return _on_db(f"agentctl compensate {_arg(run_id)}")
