"""``{file: PATH}`` secret references (reference §5.1) under ``policy.secretFileRoots``.

The roots of the run being prepared or executed are set in a context variable by the
engine (``secret_file_roots``), so every place that resolves a secret reference — provider
credentials and headers, action and MCP environments — applies the same rules: the path
has no ``..`` component, resolves (symlinks followed) to a regular file inside a root, is at
most 64 KiB of UTF-8; one trailing LF or CRLF is stripped and an empty value is refused.
A violation is a policy error (exit 3 before a run; a task failure inside one).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PurePath

from agentctl.errors import PolicyDeniedError

__all__ = ["MAX_SECRET_FILE_BYTES", "read_secret_file", "secret_file_roots"]

MAX_SECRET_FILE_BYTES = 64 * 1024
_ROOTS: ContextVar[tuple[Path, ...]] = ContextVar("agentctl_secret_file_roots", default=())


@contextmanager
def secret_file_roots(base: Path, roots: Sequence[str]) -> Iterator[None]:
    """Make ``roots`` (relative to ``base``, the workspace root, or absolute) current."""
    token = _ROOTS.set(tuple((base / root).resolve(strict=False) for root in roots))
    try:
        yield
    finally:
        _ROOTS.reset(token)


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
