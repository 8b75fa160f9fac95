"""Secret references: the one resolver every consumer uses (``{env}``, ``{file}``, ``{process}``).

Provider credentials and headers, command-provider and action environments, MCP and A2A
headers and MCP server environments all resolve through :func:`resolve_secret`, so a
reference that validates resolves the same way wherever it appears. Consumers translate the
error to their own vocabulary (a provider's ``provider.credential_missing``, a task
failure), but the rules live here:

- ``{env: NAME}`` reads the environment mapping the caller passes (already limited to
  ``policy.environmentAllowlist`` where the format says so).
- ``{file: PATH}`` reads a regular file under a ``policy.secretFileRoots`` entry: no ``..``
  component, symlinks followed but the target must stay inside a root, at most 64 KiB of
  UTF-8.
- ``{process: {command, args, timeoutSeconds, outputLimitBytes}}`` runs an executable whose
  basename is in ``policy.secretProcessAllowlist`` directly (no shell), with a cleared
  environment and no stdin, in the workspace root; its stdout is the secret. A non-zero
  exit, a timeout, output over the limit, empty or non-UTF-8 output fail.

For every shape one trailing LF or CRLF is stripped and an empty value is refused. A path
or executable the policy does not allow is a :class:`PolicyDeniedError` (exit 3 before a
run, a task failure inside one); anything else that keeps a reference from resolving is a
:class:`SecretUnresolved`. The policy of the run being prepared or executed is made current
with :func:`secret_sources`. Resolved values live only in memory; what may be shown or
stored is a :class:`SecretDescription` (source and SHA-256).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from pydantic.dataclasses import dataclass as record

from agentctl.error_codes import ErrorCode
from agentctl.errors import AgentctlError, PolicyDeniedError
from agentctl.typed_records import CAMEL, CamelRecord

__all__ = [
    "MAX_SECRET_FILE_BYTES",
    "ResolvedSecret",
    "SecretDescription",
    "SecretUnresolved",
    "read_secret_file",
    "resolve_secret",
    "secret_sources",
]

MAX_SECRET_FILE_BYTES = 64 * 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class _Sources:
    file_roots: tuple[Path, ...] = ()
    process_allowlist: tuple[str, ...] = ()
    cwd: Path | None = None


_NO_SOURCES = _Sources()
_SOURCES: ContextVar[_Sources | None] = ContextVar("agentctl_secret_sources", default=None)


def _current() -> _Sources:
    return _SOURCES.get() or _NO_SOURCES


class SecretUnresolved(AgentctlError):
    """A well-formed reference whose value cannot be had (unset variable, failed process)."""

    default_code = ErrorCode.SECRET_UNRESOLVED


@contextmanager
def secret_sources(base: Path, policy: Mapping[str, Any]) -> Iterator[None]:
    """Make ``policy``'s secret file roots and process allow-list current.

    ``base`` is the workspace root: relative roots and secret processes' working directory
    are taken from it.
    """
    roots = [str(root) for root in policy.get("secretFileRoots") or []]
    allowed = [str(name) for name in policy.get("secretProcessAllowlist") or []]
    token = _SOURCES.set(
        _Sources(
            file_roots=tuple((base / root).resolve(strict=False) for root in roots),
            process_allowlist=tuple(allowed),
            cwd=base,
        )
    )
    try:
        yield
    finally:
        _SOURCES.reset(token)


@record(frozen=True, config=CAMEL)
class SecretDescription(CamelRecord):
    """What may be shown or stored about a secret: its source and a digest of its value."""

    source: str
    sha256: str


@dataclass(frozen=True)
class ResolvedSecret:
    """A resolved secret. ``value`` is excluded from ``repr`` so it never lands in a log."""

    source: str
    value: str = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.value.encode()).hexdigest()

    def describe(self) -> SecretDescription:
        return SecretDescription(source=self.source, sha256=self.sha256)


def resolve_secret(ref: Any, *, environ: Mapping[str, str], what: str) -> ResolvedSecret:
    """Resolve one secret reference; ``what`` names its use in messages (``header `X```)."""
    if not isinstance(ref, Mapping) or len(ref) != 1:
        raise SecretUnresolved(
            f"{what} must be a secret reference: `{{env: NAME}}`, `{{file: PATH}}` or "
            "`{process: {command: …}}`",
            code="secret.invalid",
        )
    ((shape, target),) = ref.items()
    if shape == "env":
        return ResolvedSecret(f"env:{target}", _read_env(target, environ, what))
    if shape == "file":
        return ResolvedSecret(f"file:{target}", read_secret_file(target))
    if shape == "process":
        command = target.get("command") if isinstance(target, Mapping) else None
        return ResolvedSecret(f"process:{command}", _run_secret_process(target, what))
    raise SecretUnresolved(
        f"{what} uses an unknown secret reference shape `{shape}`", code="secret.invalid"
    )


def _strip_one_newline(value: str) -> str:
    return value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")


def _read_env(name: Any, environ: Mapping[str, str], what: str) -> str:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise SecretUnresolved(
            f"{what} names an invalid environment variable {name!r}", code="secret.invalid"
        )
    value = _strip_one_newline(environ.get(name) or "")
    if not value:
        raise SecretUnresolved(
            f"{what}: environment variable `{name}` is not set or empty",
            hint=f"export {name}=... before running the workflow",
        )
    return value


def _denied(message: str, hint: str, code: str = "policy.secret_file") -> PolicyDeniedError:
    return PolicyDeniedError(f"policy denied effect: {message}", code=code, hint=hint)


def read_secret_file(path_text: object) -> str:
    """The secret held by the file, under the current ``policy.secretFileRoots``."""
    roots = _current().file_roots
    if not isinstance(path_text, str) or not path_text or "\0" in path_text:
        raise _denied(
            "a {file} secret reference needs a non-empty path", "write {file: secrets/token}"
        )
    if not roots:
        raise _denied(
            f"secret file `{path_text}` cannot be read: policy.secretFileRoots is empty",
            "add the directory holding it to spec.policy.secretFileRoots",
        )
    if ".." in PurePath(path_text).parts:
        raise _denied(
            f"secret file `{path_text}` has a `..` component",
            "name the file inside a secret file root",
        )
    candidates = (
        [Path(path_text)] if Path(path_text).is_absolute() else [root / path_text for root in roots]
    )
    for candidate in candidates:
        resolved = candidate.resolve(strict=False)
        if not any(resolved.is_relative_to(root) for root in roots):
            continue
        if not resolved.is_file():
            raise _denied(
                f"secret file `{path_text}` does not exist or is not a regular file",
                "create it, or fix the path",
            )
        data = resolved.read_bytes()
        if len(data) > MAX_SECRET_FILE_BYTES:
            raise _denied(
                f"secret file `{path_text}` is larger than 64 KiB",
                "keep only the secret in the file",
            )
        try:
            value = _strip_one_newline(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _denied(
                f"secret file `{path_text}` is not UTF-8", "store the secret as UTF-8 text"
            ) from exc
        if not value:
            raise _denied(f"secret file `{path_text}` is empty", "put the secret in it")
        return value
    raise _denied(
        f"secret file `{path_text}` is outside every policy.secretFileRoots entry",
        "move it under a secret file root, or add its directory to spec.policy.secretFileRoots",
    )


def _run_secret_process(spec: Any, what: str) -> str:
    sources = _current()
    if not isinstance(spec, Mapping) or not isinstance(spec.get("command"), str):
        raise SecretUnresolved(
            f"{what}: a {{process}} secret needs a command", code="secret.invalid"
        )
    command = str(spec["command"])
    if PurePath(command).name not in sources.process_allowlist:
        raise _denied(
            f"secret process `{command}` is not in policy.secretProcessAllowlist",
            f"add `{PurePath(command).name}` to spec.policy.secretProcessAllowlist",
            code="policy.secret_process",
        )
    executable = command if os.sep in command else shutil.which(command)
    if executable is None or not Path(executable).is_file():
        raise SecretUnresolved(f"{what}: secret process `{command}` was not found")
    args = [str(arg) for arg in spec.get("args") or []]
    timeout = float(spec.get("timeoutSeconds") or 5)
    limit = int(spec.get("outputLimitBytes") or 16384)
    try:
        child = subprocess.Popen(
            [executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd=sources.cwd,
            start_new_session=True,
        )
    except OSError as exc:
        raise SecretUnresolved(f"{what}: secret process `{command}` cannot start: {exc}") from exc
    expired = threading.Event()

    def kill() -> None:
        expired.set()
        _kill_group(child)

    # The timer only ever signals a child that has not been reaped yet, so its process
    # group id cannot have been reused: it is cancelled before the final wait.
    started = time.monotonic()
    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        assert child.stdout is not None
        data = child.stdout.read(limit + 1)
        if len(data) > limit:
            _kill_group(child)
        child.stdout.close()
    finally:
        timer.cancel()
    try:
        code = child.wait(timeout=max(0.0, timeout - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        kill()
        code = child.wait()
    if expired.is_set():
        raise SecretUnresolved(f"{what}: secret process `{command}` timed out after {timeout:g}s")
    if len(data) > limit:
        raise SecretUnresolved(
            f"{what}: secret process `{command}` printed more than {limit} bytes"
        )
    if code != 0:
        raise SecretUnresolved(f"{what}: secret process `{command}` exited with code {code}")
    try:
        value = _strip_one_newline(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SecretUnresolved(
            f"{what}: secret process `{command}` printed non-UTF-8 output"
        ) from exc
    if not value:
        raise SecretUnresolved(f"{what}: secret process `{command}` printed nothing")
    return value


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
