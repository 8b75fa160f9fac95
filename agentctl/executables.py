"""Which executable a process step runs: the allow-list check and the ``PATH`` lookup
(docs/actions.md, "Finding the executable"). :mod:`agentctl.process` starts what this
names; every host process agentctl starts is resolved here first."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from agentctl.errors import PolicyDeniedError, TaskError

__all__ = ["check_allowed", "resolve_executable"]


def check_allowed(command: str, allowlist: Sequence[str]) -> None:
    """The command's form and the allow-list check, without looking for it on this host
    (a container's command is looked up inside its image)."""
    if not command or "\0" in command:
        raise TaskError(f"process command {command!r} is not valid", code="input.invalid")
    basename = os.path.basename(command)
    if not os.path.isabs(command) and basename != command:
        raise TaskError(
            f"process command `{command}` must be an absolute path or a bare executable name",
            code="input.invalid",
            hint="use an absolute path, or a name found on PATH",
        )
    if basename not in allowlist:
        raise PolicyDeniedError(
            f"policy denied effect: process `{basename}` is not in policy.processAllowlist",
            code="policy.process_not_allowed",
            hint=f"add `{basename}` to spec.policy.processAllowlist",
        )


def resolve_executable(
    command: str, allowlist: Sequence[str], search_path: str | None = None
) -> str:
    """Return the absolute executable path for ``command`` after the allow-list check.

    The allow-list holds basenames (``policy.processAllowlist``). Names are looked up on
    ``search_path``, which defaults to agentctl's own ``PATH``: the child's environment is
    cleared, so its ``PATH`` (if any) says nothing about where executables are.
    """
    check_allowed(command, allowlist)
    if os.path.isabs(command):
        if not os.path.exists(command):
            raise TaskError(
                f"process executable `{command}` does not exist", code="process.not_found"
            )
        if not os.path.isfile(command) or not os.access(command, os.X_OK):
            raise TaskError(
                f"process `{command}` is not an executable file", code="process.not_executable"
            )
        return command
    path = search_path if search_path is not None else os.environ.get("PATH", os.defpath)
    known = _FOUND.get((command, path))
    if known is not None and _executable_file(known):
        return known
    found = shutil.which(command, path=path)
    if found is None:
        raise TaskError(
            f"process executable `{command}` was not found on PATH `{path}`",
            code="process.not_found",
            hint="install it, or give the action an absolute `command` path",
        )
    resolved = os.path.abspath(found)
    if os.path.isabs(found):  # not from a relative PATH entry (whose target moves with cwd)
        if len(_FOUND) >= _FOUND_LIMIT:
            _FOUND.clear()
        _FOUND[(command, path)] = resolved
    return resolved


#: Names found on a search path, ``(name, PATH) -> absolute path``, as a shell hashes the
#: commands it ran (bash's ``hash``): a process step does not walk every directory of
#: ``PATH`` again (a system call per directory, more CPU than the step's statements on some
#: hosts). An entry is used while the file it names is still an executable file, and looked
#: up again once it is not; a name installed later in an earlier ``PATH`` directory is found
#: by a new process.
_FOUND: dict[tuple[str, str], str] = {}
_FOUND_LIMIT = 256


def _executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
