"""File primitives of ``builtin.read`` / ``builtin.write``: capped UTF-8 reads, atomic writes.

Paths reaching these functions have already passed ``agentctl.policy.paths``; this module
only enforces size and encoding limits and makes writes crash-safe: a reader sees either
the old file or the new one, never a torn mix, and after ``write_atomic`` returns the new
content and the directory entry pointing at it are on disk.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from agentctl.errors import TaskError

__all__ = [
    "is_atomic_temp",
    "MAX_FILE_BYTES",
    "NEW_FILE_MODE",
    "naive_diff",
    "read_existing_for_write",
    "read_text",
    "write_atomic",
]

MAX_FILE_BYTES = 1 << 20
"""Direct reads, write targets and instruction files are capped at 1 MiB
(docs/workflow-language.md)."""

NEW_FILE_MODE = 0o644
"""Mode of a file created by ``write_atomic`` (fixed, independent of the umask)."""


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """Read a UTF-8 file of at most ``limit`` bytes (``TaskError`` otherwise)."""
    data = _read_capped(path, limit, purpose="read")
    return _decode(path, data)


def read_existing_for_write(path: Path, limit: int = MAX_FILE_BYTES) -> str | None:
    """The current text of a write target, or ``None`` when it does not exist.

    The old text decides ``before``/``changed`` and the diff, so a target over the cap or
    not valid UTF-8 cannot be overwritten (docs/workflow-language.md).
    """
    try:
        data = _read_capped(path, limit, purpose="overwrite")
    except TaskError as error:
        if error.code == "file.not_found":
            return None
        raise
    return _decode(path, data)


#: The temporary file :func:`write_atomic` renames over its target (``mkstemp``'s 8
#: random characters between the target's name and ``.tmp``).
_ATOMIC_TEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def is_atomic_temp(name: str) -> bool:
    """Whether ``name`` is a temporary file of an atomic write in progress: it exists
    only until its rename, so it is never anyone's artifact."""
    return _ATOMIC_TEMP.match(name) is not None


def write_atomic(path: Path, content: str) -> None:
    """Replace ``path`` with ``content`` (UTF-8, bytes as given: no newline translation).

    Parents are created. The text goes to a temporary file in the same directory, which is
    fsynced, given the old file's mode (``NEW_FILE_MODE`` for a new file) and renamed over
    the target; then the directory is fsynced so the rename itself survives a crash. On
    any failure the temporary file is removed and the target is untouched.
    """
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TaskError(
            f"content for `{path}` cannot be encoded as UTF-8: {exc.reason}",
            code="input.invalid",
        ) from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = _existing_mode(path)
        fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _write_error(path, exc) from exc
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp_name, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        if isinstance(exc, OSError):
            raise _write_error(path, exc) from exc
        raise
    try:
        _fsync_directory(path.parent)
    except OSError as exc:
        raise _write_error(path, exc) from exc


def naive_diff(before: str | None, after: str) -> str:
    """The whole-file diff of ``builtin.write`` (docs/actions.md), byte for byte.

    ``""`` when unchanged; otherwise ``--- before`` LF ``+++ after`` LF, then ``-`` + the
    old text with every LF replaced by LF ``-``, then LF, then ``+`` + the new text with
    every LF replaced by LF ``+``. A missing file (``before is None``) diffs as empty old
    text, so creating a file shows a single ``-`` line with nothing after it.
    """
    if before == after:
        return ""
    old = "" if before is None else before
    return (
        "--- before\n+++ after\n"
        + "-"
        + old.replace("\n", "\n-")
        + "\n"
        + "+"
        + after.replace("\n", "\n+")
    )


def _read_capped(path: Path, limit: int, *, purpose: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            # Read one byte past the cap: a file that grows after fstat is still caught.
            data = handle.read(limit + 1) if size <= limit else b""
    except FileNotFoundError as exc:
        raise TaskError(f"file `{path}` does not exist", code="file.not_found") from exc
    except IsADirectoryError as exc:
        raise TaskError(f"`{path}` is a directory, not a file", code="file.is_directory") from exc
    except OSError as exc:
        raise TaskError(
            f"cannot read `{path}`: {exc.strerror or exc}", code="file.unreadable"
        ) from exc
    if size > limit or len(data) > limit:
        action = "overwritten" if purpose == "overwrite" else "read"
        raise TaskError(
            f"file `{path}` is larger than {limit} bytes and cannot be {action}",
            code="file.too_large",
        )
    return data


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(
            f"file `{path}` is not valid UTF-8 (byte {exc.start})", code="file.not_utf8"
        ) from exc


def _existing_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return NEW_FILE_MODE


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_error(path: Path, exc: OSError) -> TaskError:
    if isinstance(exc, IsADirectoryError):
        return TaskError(f"`{path}` is a directory, not a file", code="file.is_directory")
    return TaskError(f"cannot write `{path}`: {exc.strerror or exc}", code="file.write_failed")
