"""The one reader of files a user names to agentctl (docs/running.md, "Files you name").

Workflow files, ``--inputs-file``, ``--vars-file``, ``--result-file``, ``--evidence-file``,
``--result-schema-file``, pack manifests, the files inside a pack, ``agentctl.pack.lock``
and ``{file: PATH}`` secrets are all read here, so one rule holds for each of them: only a
regular file is read, never more than its limit, and anything else is a clear usage error
(exit 2, ``input_file.invalid``) naming the file.

The file is opened non-blocking and judged by ``fstat`` on the open descriptor (no race
between a check and the read): a FIFO is refused without waiting for a writer, a device
such as ``/dev/zero`` (also behind a symlink) without reading from it, a directory without
listing it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agentctl.errors import UsageError

__all__ = ["MAX_INPUT_BYTES", "read_input_bytes", "read_input_text"]

MAX_INPUT_BYTES = 1 << 20  # 1 MiB: documents, inputs, evidence and results are small
_CHUNK = 1 << 16


def read_input_bytes(
    path: str | os.PathLike[str],
    what: str,
    *,
    limit: int = MAX_INPUT_BYTES,
    hint: str | None = None,
) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in errors, e.g. "inputs
    file"); ``UsageError`` (``input_file.invalid``) for anything else or over ``limit``."""
    name = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(name, flags)
    except FileNotFoundError as exc:
        raise _refused(
            f"{what} {name} does not exist",
            hint or f"check the path (a relative path starts at {Path.cwd()})",
        ) from exc
    except OSError as exc:
        raise _refused(
            f"cannot read {what} {name}: {exc.strerror or exc}",
            hint or "check the path and its permissions",
        ) from exc
    try:
        status = os.fstat(fd)
        mode = status.st_mode
        if not stat.S_ISREG(mode):
            raise _refused(
                f"{what} {name} is {_kind(mode)}, not a regular file",
                hint or "name a regular file; pipes, devices and directories are not read",
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _refused(
            f"cannot read {what} {name}: {exc.strerror or exc}",
            hint or "check the path and its permissions",
        ) from exc
    finally:
        os.close(fd)
    if size > limit:
        raise _refused(
            f"{what} {name} is {max(size, status.st_size)} bytes; the limit is {limit} bytes "
            f"({_size(limit)})",
            hint or f"keep the {what} under {_size(limit)}",
        )
    return b"".join(chunks)


def read_input_text(
    path: str | os.PathLike[str],
    what: str,
    *,
    limit: int = MAX_INPUT_BYTES,
    hint: str | None = None,
) -> str:
    """:func:`read_input_bytes` decoded as UTF-8 (a leading byte-order mark is dropped)."""
    data = read_input_bytes(path, what, limit=limit, hint=hint)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _refused(
            f"{what} {os.fspath(path)} is not UTF-8 text (byte {exc.start})",
            hint or "save the file as UTF-8",
        ) from exc


def _refused(message: str, hint: str) -> UsageError:
    return UsageError(message, code="input_file.invalid", hint=hint)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(limit: int) -> str:
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    return f"{limit / 1024:g} KiB"
