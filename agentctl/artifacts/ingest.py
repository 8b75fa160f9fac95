"""Copying a file into the store: hash, stage under ``tmp/`` while hashing, then publish.

The source is hashed once before anything is written (:func:`prehash`), so the ingestion
lease can name its digest from the start: one commit per batch instead of two. Staging
reads it again (from the page cache), hashing and writing in the same pass, and the caller
compares the two digests — a file that changed in between is caught, never mislabelled.
The temporary file is fsynced before it is ever renamed into ``blobs/``, so a blob name
always names complete bytes, even after a power loss. The source is opened without following a
final symlink and must be a regular file: auto-ingestion must never copy a link's target
from outside the workspace.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentctl.artifacts.layout import DIGEST_PREFIX, Layout
from agentctl.errors import TaskError
from agentctl.store.blob_sealing import blob_is_sealed, open_blob, seal_blob
from agentctl.store.keyring import CLEAR, Sealer

__all__ = ["CHUNK_BYTES", "FaultPoint", "Staged", "hash_file", "prehash", "publish", "stage"]

#: Read/write unit: large enough that a typical artifact is one system call each way.
CHUNK_BYTES = 1 << 20


class FaultPoint(Protocol):
    """The crash suite's hook (``agentctl.engine.core.faults.Faults`` satisfies it)."""

    def hit(self, point: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Staged:
    lease_id: str
    digest: str
    size: int
    temp: Path


def _too_large(source: Path, cap: int) -> TaskError:
    return TaskError(
        f"{source} is larger than the artifact size cap of {cap} bytes",
        code="artifact.too_large",
        hint="write smaller files, or raise runtime.budgets.maxArtifactBytes",
    )


def _open_source(source: Path, cap: int) -> int:
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise TaskError(
            f"cannot read {source} for ingestion: {exc.strerror}",
            code="artifact.unreadable",
            hint="artifacts must be regular files the task left in place (not symlinks)",
        ) from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise TaskError(
            f"{source} is not a regular file",
            code="artifact.not_regular",
            hint="only regular files are ingested as artifacts",
        )
    if info.st_size > cap:
        os.close(fd)
        raise _too_large(source, cap)
    return fd


def hash_file(path: Path, sealer: Sealer = CLEAR) -> tuple[str, int]:
    """``(sha256:<hex>, size)`` of a file's plaintext, read in large chunks without
    following links (a sealed blob is opened with ``sealer`` first: its name is the digest
    of its plaintext)."""
    hasher = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        chunk = os.read(fd, CHUNK_BYTES)
        if blob_is_sealed(chunk):
            parts = [chunk]
            while chunk := os.read(fd, CHUNK_BYTES):
                parts.append(chunk)
            plain = open_blob(sealer, path.parent.name + path.name, b"".join(parts))
            return DIGEST_PREFIX + hashlib.sha256(plain).hexdigest(), len(plain)
        while chunk:
            hasher.update(chunk)
            size += len(chunk)
            chunk = os.read(fd, CHUNK_BYTES)
    finally:
        os.close(fd)
    return DIGEST_PREFIX + hasher.hexdigest(), size


def prehash(source: Path, cap: int) -> tuple[str, int]:
    """``(sha256:<hex>, size)`` of a regular file of at most ``cap`` bytes."""
    src = _open_source(source, cap)
    try:
        hasher = hashlib.sha256()
        size = 0
        while chunk := os.read(src, CHUNK_BYTES):
            size += len(chunk)
            if size > cap:
                raise _too_large(source, cap)
            hasher.update(chunk)
    finally:
        os.close(src)
    return DIGEST_PREFIX + hasher.hexdigest(), size


def stage(
    layout: Layout, source: Path, lease_id: str, cap: int, faults: FaultPoint | None = None
) -> Staged:
    """Copy ``source`` to ``tmp/<lease_id>.part``, hashing as it goes, and fsync it.

    The cap is enforced on the bytes actually read, so a file that grows after ``stat``
    still cannot smuggle more than ``cap`` bytes in.
    """
    temp = layout.temp_path(lease_id)
    src = _open_source(source, cap)
    sealing = layout.sealer.enabled
    try:
        dst = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            hasher = hashlib.sha256()
            size = 0
            # With encryption on the plaintext is held (at most ``cap`` bytes) and only its
            # sealed form is written: no clear byte reaches the artifact root.
            held: list[bytes] = []
            while chunk := os.read(src, CHUNK_BYTES):
                size += len(chunk)
                if size > cap:
                    raise _too_large(source, cap)
                hasher.update(chunk)
                if sealing:
                    held.append(chunk)
                    continue
                _write_all(dst, chunk)
                if faults is not None:
                    faults.hit("artifact.chunk_written")
            if sealing:
                name = hasher.hexdigest()
                _write_all(dst, seal_blob(layout.sealer, name, b"".join(held)))
            os.fsync(dst)
        finally:
            os.close(dst)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    finally:
        os.close(src)
    return Staged(lease_id, DIGEST_PREFIX + hasher.hexdigest(), size, temp)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def publish(layout: Layout, staged: Staged) -> Path:
    """Move staged bytes to their blob name (caller holds the store lock); returns the
    blob folder to fsync.

    If the blob already exists and its bytes still hash to its name, the staged copy is
    dropped — that is the deduplication. Anything else found under the name (other bytes,
    even of the same size, or not a regular file) can only be damage, since blobs are
    immutable: the fresh, verified bytes replace it, so a ref recorded for this ingestion
    never points at damaged bytes. Rehashing costs a read of the existing blob, paid only
    when the same bytes are ingested again.
    """
    blob = layout.blob_path(staged.digest)
    if _intact(blob, staged, layout.sealer):
        staged.temp.unlink()
        return blob.parent
    try:
        os.chmod(staged.temp, 0o400)
    except FileNotFoundError as exc:
        # Only gc removes a temporary file, and only once its lease has lapsed.
        raise TaskError(
            f"the temporary file of lease {staged.lease_id} was collected: its lease "
            "expired before the bytes were published",
            code="artifact.lease_expired",
            hint="retry the task; ingestion must finish within the lease hour",
        ) from exc
    try:
        os.replace(staged.temp, blob)
    except FileNotFoundError:
        # First blob of this two-hex folder (creating it up front costs a syscall per file).
        blob.parent.mkdir(mode=0o700, exist_ok=True)
        os.replace(staged.temp, blob)
    return blob.parent


def _intact(blob: Path, staged: Staged, sealer: Sealer) -> bool:
    """True when ``blob`` is a regular file holding exactly the staged bytes."""
    try:
        existing = os.stat(blob, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(existing.st_mode):
        return False
    if existing.st_size != staged.size and not sealer.enabled:
        return False
    try:
        digest, size = hash_file(blob, sealer)
    except OSError:
        return False  # unreadable: replaced like any other damage
    return digest == staged.digest and size == staged.size
