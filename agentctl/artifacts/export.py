"""Copying a blob out of the store to a path, atomically and safely.

A destination that comes from somewhere other than the operator (``confine=True``, the
default) must stay inside ``base``: a ``..`` component, an absolute path elsewhere, or a
parent folder that is a symlink leading outside is refused, and the destination itself is
never a symlink (writing through one is how a crafted name escapes). The operator's own
destination (``agentctl artifacts export``, ``confine=False``) may be any path they could
write with ``cp``; it is still never written through a symlink (with ``overwrite`` the link
itself is replaced) and an existing file is replaced only with ``overwrite``.

Bytes go to a temporary file beside the destination, are checked against the digest and
fsynced, then appear under the final name in one step: ``link``
(fails if something appeared meanwhile) or, with ``overwrite``, ``rename``.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from pathlib import Path

from agentctl.artifacts.ingest import CHUNK_BYTES
from agentctl.artifacts.layout import DIGEST_PREFIX, Layout, fsync_dir
from agentctl.artifacts.models import ExportResult
from agentctl.errors import PersistenceError, UsageError
from agentctl.store.blob_sealing import blob_is_sealed, open_blob
from agentctl.store.keyring import Sealer

__all__ = ["export_blob"]


#: The longest file name most file systems accept, in bytes.
_NAME_MAX = 255


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _refuse(message: str, code: str, hint: str) -> UsageError:
    return UsageError(message, code=code, hint=hint)


def _checked_target(dest: Path, base: Path) -> Path:
    """The absolute destination, once it is known not to leave ``base``."""
    if ".." in dest.parts:
        raise _refuse(
            f"export destination {dest} contains '..'",
            "artifact.path_traversal",
            "name a path inside the current directory without '..'",
        )
    base_abs = os.path.abspath(base)
    target = os.path.abspath(os.path.join(base_abs, dest))
    if any(len(os.fsencode(part)) > _NAME_MAX for part in Path(target).parts):
        raise _refuse(
            f"export destination {str(dest)[:80]}… has a name longer than {_NAME_MAX} bytes",
            "artifact.path_too_long",
            "choose a shorter file name",
        )
    if not _inside(target, base_abs) or target == base_abs:
        raise _refuse(
            f"export destination {dest} is outside {base_abs}",
            "artifact.path_traversal",
            "export into the current directory (cd to where the file should go)",
        )
    # The deepest folder that exists decides where the path really leads.
    existing = os.path.dirname(target)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not _inside(os.path.realpath(existing), os.path.realpath(base_abs)):
        raise _refuse(
            f"export destination {dest} leads outside {base_abs} through a symlink",
            "artifact.symlink_escape",
            "choose a destination whose folders are not links to elsewhere",
        )
    return Path(target)


def _operator_target(dest: Path, base: Path) -> Path:
    target = os.path.abspath(os.path.join(os.path.abspath(base), dest))
    if any(len(os.fsencode(part)) > _NAME_MAX for part in Path(target).parts):
        raise _refuse(
            f"export destination {str(dest)[:80]}… has a name longer than {_NAME_MAX} bytes",
            "artifact.path_too_long",
            "choose a shorter file name",
        )
    return Path(target)


def _check_existing(target: Path, overwrite: bool, *, confine: bool = True) -> None:
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) and not confine:
        if not overwrite:
            raise _refuse(
                f"export destination {target} already exists (a symlink)",
                "artifact.destination_exists",
                "pass --force to replace the link itself with the file (never written through)",
            )
        return
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(
            f"export destination {target} is a symlink",
            "artifact.symlink_escape",
            "remove the link or choose another destination",
        )
    if stat.S_ISDIR(info.st_mode):
        raise _refuse(
            f"export destination {target} is a directory",
            "artifact.destination_is_directory",
            "name the file to create, e.g. DIR/report.txt",
        )
    if not overwrite:
        raise _refuse(
            f"export destination {target} already exists",
            "artifact.destination_exists",
            "pass --force to replace it",
        )


def _copy_verified(blob: Path, temp: Path, digest: str, sealer: Sealer) -> int:
    try:
        src = os.open(blob, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise PersistenceError(
            f"artifact {digest} is missing from the store ({blob})",
            code="artifact.missing",
            hint="run `agentctl artifacts verify --all` to see what else is affected",
        ) from exc
    except OSError as exc:
        # ELOOP: the blob was replaced by a symlink, which is never followed.
        raise PersistenceError(
            f"artifact {digest} cannot be read from the store ({blob}): {exc.strerror}; "
            "a blob must be a regular file, never a link",
            code="artifact.corrupt",
            hint="run `agentctl artifacts verify --all`; rerun the task that wrote it",
        ) from exc
    if not stat.S_ISREG(os.fstat(src).st_mode):
        os.close(src)
        raise PersistenceError(
            f"artifact {digest} in the store ({blob}) is not a regular file",
            code="artifact.corrupt",
            hint="run `agentctl artifacts verify --all`; rerun the task that wrote it",
        )
    try:
        dst = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        try:
            hasher = hashlib.sha256()
            size = 0
            chunk = os.read(src, CHUNK_BYTES)
            if blob_is_sealed(chunk):  # opened whole (blobs are capped), then written
                parts = [chunk]
                while chunk := os.read(src, CHUNK_BYTES):
                    parts.append(chunk)
                chunk = open_blob(sealer, blob.parent.name + blob.name, b"".join(parts))
                hasher.update(chunk)
                size = len(chunk)
                _write_all(dst, chunk)
                chunk = b""
            while chunk:
                hasher.update(chunk)
                size += len(chunk)
                _write_all(dst, chunk)
                chunk = os.read(src, CHUNK_BYTES)
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    if DIGEST_PREFIX + hasher.hexdigest() != digest:
        raise PersistenceError(
            f"artifact {digest} is corrupt: its bytes no longer match its digest",
            code="artifact.corrupt",
            hint="run `agentctl artifacts verify --all`; rerun the task that wrote it",
        )
    return size


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def export_blob(
    layout: Layout,
    digest: str,
    dest: Path,
    *,
    base: Path,
    overwrite: bool = False,
    confine: bool = True,
) -> ExportResult:
    target = _checked_target(dest, base) if confine else _operator_target(dest, base)
    _check_existing(target, overwrite, confine=confine)
    target.parent.mkdir(parents=True, exist_ok=True)
    if confine and not _inside(os.path.realpath(target.parent), os.path.realpath(base)):
        raise _refuse(
            f"export destination {dest} leads outside {base} through a symlink",
            "artifact.symlink_escape",
            "choose a destination whose folders are not links to elsewhere",
        )
    # Not derived from the target's name, so a name near the length limit still fits.
    temp = target.parent / f".agentctl-export.{secrets.token_hex(6)}"
    try:
        size = _copy_verified(layout.blob_path(digest), temp, digest, layout.sealer)
        if overwrite:
            _check_existing(target, overwrite=True, confine=confine)
            os.replace(temp, target)
        else:
            try:
                os.link(temp, target)
            except FileExistsError as exc:
                raise _refuse(
                    f"export destination {target} already exists",
                    "artifact.destination_exists",
                    "pass --force to replace it",
                ) from exc
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(target.parent)
    return ExportResult(digest=digest, path=str(target), size=size)
