"""``{process: {command, args, timeoutSeconds, outputLimitBytes}}`` secret references.

The secret is the standard output of a small program a person trusts to print it (a
password manager's CLI, ``pass show key``). The program's basename must be in
``policy.secretProcessAllowlist`` (set for the run being prepared or executed, beside the
secret file roots). It runs directly — no shell — with a cleared environment, empty stdin,
in the workspace root, in a process group of its own that is killed at the timeout.
A non-zero exit, a timeout, output over the limit, empty output or output that is not
UTF-8 is an error; one trailing LF or CRLF is stripped. Nothing it prints is ever shown
in an error message.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentctl.errors import PolicyDeniedError, TaskError

__all__ = ["run_secret_process"]


def _failed(command: str, why: str) -> TaskError:
    return TaskError(
        f"secret process `{command}` {why}",
        code="secret.process_failed",
        hint="run the command by hand to check that it prints the secret",
    )


def _executable(command: str, allowlist: tuple[str, ...]) -> str:
    basename = os.path.basename(command)
    if basename not in allowlist:
        raise PolicyDeniedError(
            f"policy denied effect: secret process `{basename}` is not in "
            "policy.secretProcessAllowlist",
            code="policy.secret_process",
            hint=f"add `{basename}` to spec.policy.secretProcessAllowlist",
        )
    if os.path.isabs(command):
        found: str | None = command if os.access(command, os.X_OK) else None
    elif basename != command:
        raise _failed(command, "must be an absolute path or a bare executable name")
    else:
        found = shutil.which(command, path=os.environ.get("PATH", os.defpath))
    if found is None or not os.path.isfile(found):
        raise _failed(command, "was not found or is not an executable file")
    return found


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)


def run_secret_process(spec: Any, allowlist: tuple[str, ...], cwd: Path) -> str:
    """The secret the reference's program prints, after the rules above."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("command"), str):
        raise _failed(str(spec), "is not a {process: {command: …}} reference")
    command = str(spec["command"])
    args = [str(arg) for arg in spec.get("args") or []]
    timeout = float(spec.get("timeoutSeconds") or 5)
    limit = int(spec.get("outputLimitBytes") or 16384)
    argv = [_executable(command, allowlist), *args]
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd=cwd if cwd.is_dir() else None,
            start_new_session=True,
        )
    except OSError as exc:
        raise _failed(command, f"could not be started: {exc.strerror}") from exc
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        _kill_group(process)

    timer = threading.Timer(timeout, expire)
    timer.start()
    try:
        assert process.stdout is not None
        data = process.stdout.read(limit + 1)
        if len(data) > limit:
            _kill_group(process)
        code = process.wait()
    finally:
        timer.cancel()
        if process.stdout is not None:
            process.stdout.close()
        _kill_group(process)
    if timed_out.is_set():
        raise _failed(command, f"did not finish within {timeout:g}s")
    if len(data) > limit:
        raise _failed(command, f"printed more than {limit} bytes")
    if code != 0:
        raise _failed(command, f"exited with status {code}")
    try:
        value = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _failed(command, "printed output that is not UTF-8") from exc
    value = value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")
    if not value:
        raise _failed(command, "printed nothing")
    return value
