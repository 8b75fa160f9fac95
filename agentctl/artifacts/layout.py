"""Where artifact bytes live on disk, and the primitives that keep them consistent.

::

    artifacts/            beside the database (``agentctl.store.location.artifact_root``)
      .lock               flock: publishing a blob and gc's decide-and-quarantine step
      blobs/ab/cdef…      immutable blobs, named by their SHA-256 (first two hex = folder)
      tmp/<lease>.part    bytes being ingested, named by the lease that protects them
      quarantine/<hex>    blobs gc has doomed; deleted after gc's transaction commits

Blob names are the digest, so a blob is either absent or complete: bytes are written and
fsynced under ``tmp/`` first and only then renamed into ``blobs/``.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from agentctl.errors import NotFoundError, UsageError
from agentctl.store.keyring import CLEAR, Sealer

__all__ = [
    "DIGEST_PREFIX",
    "Layout",
    "digest_hex",
    "fsync_dir",
    "hex_prefix",
]

DIGEST_PREFIX = "sha256:"
_HEX = re.compile(r"[0-9a-f]{64}")
_HEX_PREFIX = re.compile(r"[0-9a-f]{8,64}")


def digest_hex(digest: str) -> str:
    """The 64 lowercase hex of ``sha256:<hex>`` (or of bare hex); exit 2 for anything else."""
    value = digest.strip().lower()
    if value.startswith(DIGEST_PREFIX):
        value = value[len(DIGEST_PREFIX) :]
    if not _HEX.fullmatch(value):
        raise UsageError(
            f"{digest!r} is not an artifact digest",
            code="artifact.bad_digest",
            hint="pass sha256:<64 hex>, as shown by `agentctl artifacts list`",
        )
    return value


def hex_prefix(digest: str) -> str | None:
    """The hex part of a full digest or of an abbreviation of at least 8 hex digits."""
    value = digest.strip().lower()
    if value.startswith(DIGEST_PREFIX):
        value = value[len(DIGEST_PREFIX) :]
    return value if _HEX_PREFIX.fullmatch(value) else None


def fsync_dir(path: Path) -> None:
    """Make renames and links inside ``path`` durable (a rename lives in the directory)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Layout:
    root: Path
    #: Seals new blobs and opens sealed ones (the database's key ring, store/keyring.py).
    sealer: Sealer = field(default=CLEAR, compare=False)

    @property
    def blobs(self) -> Path:
        return self.root / "blobs"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    def ensure(self) -> None:
        """Create the folders, private to the user (artifacts hold task outputs)."""
        for folder in (self.root, self.blobs, self.tmp, self.quarantine):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def blob_path(self, digest: str) -> Path:
        hex_ = digest_hex(digest)
        return self.blobs / hex_[:2] / hex_[2:]

    def temp_path(self, lease_id: str) -> Path:
        return self.tmp / f"{lease_id}.part"

    def quarantine_path(self, digest: str) -> Path:
        return self.quarantine / digest_hex(digest)

    def iter_blobs(self) -> Iterator[tuple[str, Path]]:
        """Every well-named blob file on disk as ``(digest, path)``; strays are skipped."""
        if not self.blobs.is_dir():
            return
        with os.scandir(self.blobs) as folders:
            subfolders = [
                f for f in folders if len(f.name) == 2 and f.is_dir(follow_symlinks=False)
            ]
        for folder in subfolders:
            with os.scandir(folder.path) as entries:
                found = [
                    (DIGEST_PREFIX + folder.name + e.name, Path(e.path))
                    for e in entries
                    if _HEX.fullmatch(folder.name + e.name) and e.is_file(follow_symlinks=False)
                ]
            yield from found

    def require_root(self) -> None:
        if not self.root.is_dir():
            raise NotFoundError(
                f"no artifact store at {self.root}",
                code="artifact.no_store",
                hint="artifacts appear after a run whose tasks write files; check --db",
            )

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The cross-process lock: held to publish a blob and while gc decides and
        quarantines, so gc never dooms a blob another process is deduplicating against."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
