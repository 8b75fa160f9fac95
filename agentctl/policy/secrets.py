"""``{file: PATH}`` secret references under ``policy.secretFileRoots``, and the entry to
``{process: …}`` references under ``policy.secretProcessAllowlist``.

The roots of the run being prepared or executed are set in a context variable by the
engine (``secret_file_roots``), so every place that resolves a secret reference — provider
credentials and headers, action and MCP environments — applies the same rules: the path
has no ``..`` component, resolves (symlinks followed) to a regular file inside a root, is at
most 64 KiB of UTF-8; one trailing LF or CRLF is stripped and an empty value is refused.
A violation is a policy error (exit 3 before a run; a task failure inside one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PurePath

from agentctl.errors import PolicyDeniedError

__all__ = [
    "MAX_SECRET_FILE_BYTES",
    "read_secret_file",
    "read_secret_process",
    "resolve_policy_reference",
    "secret_file_roots",
]

MAX_SECRET_FILE_BYTES = 64 * 1024
_ROOTS: ContextVar[tuple[Path, ...]] = ContextVar("agentctl_secret_file_roots", default=())
# (allow-listed basenames for {process} references, the directory they run in)
_PROCESSES: ContextVar[tuple[tuple[str, ...], Path]] = ContextVar(
    "agentctl_secret_processes", default=((), Path("."))
)


@contextmanager
def secret_file_roots(
    base: Path, roots: Sequence[str], process_allowlist: Sequence[str] = ()
) -> Iterator[None]:
    """Make ``roots`` (relative to ``base``, the workspace root, or absolute) current, and
    the ``policy.secretProcessAllowlist`` that ``{process}`` references are checked against."""
    token = _ROOTS.set(tuple((base / root).resolve(strict=False) for root in roots))
    process_token = _PROCESSES.set((tuple(str(name) for name in process_allowlist), base))
    try:
        yield
    finally:
        _PROCESSES.reset(process_token)
        _ROOTS.reset(token)


def read_secret_process(spec: object) -> str:
    """The secret printed by a ``{process: …}`` reference's program (see secret_process)."""
    from agentctl.policy.secret_process import run_secret_process

    allowlist, cwd = _PROCESSES.get()
    return run_secret_process(spec, allowlist, cwd)


def resolve_policy_reference(ref: object) -> tuple[str, str] | None:
    """``(source, value)`` of a ``{file}`` or ``{process}`` reference; None for any other
    shape (``{env}`` references are resolved by each caller against its own environment)."""
    if not isinstance(ref, Mapping) or len(ref) != 1:
        return None
    ((shape, target),) = ref.items()
    if shape == "file":
        return f"file:{target}", read_secret_file(target)
    if shape == "process":
        command = target.get("command") if isinstance(target, Mapping) else None
        return f"process:{command}", read_secret_process(target)
    return None


def _denied(message: str, hint: str) -> PolicyDeniedError:
    return PolicyDeniedError(
        f"policy denied effect: {message}", code="policy.secret_file", hint=hint
    )


def read_secret_file(path_text: object) -> str:
    """The secret held by the file, after the rules of §5.1."""
    roots = _ROOTS.get()
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
            value = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _denied(
                f"secret file `{path_text}` is not UTF-8", "store the secret as UTF-8 text"
            ) from exc
        value = value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")
        if not value:
            raise _denied(f"secret file `{path_text}` is empty", "put the secret in it")
        return value
    raise _denied(
        f"secret file `{path_text}` is outside every policy.secretFileRoots entry",
        "move it under a secret file root, or add its directory to spec.policy.secretFileRoots",
    )
