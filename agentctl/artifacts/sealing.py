"""Sealing the blobs already in an artifact root (``agentctl db encryption enable|rotate``).

New blobs are sealed as they are staged (:func:`agentctl.artifacts.ingest.stage`); this
walks the blobs written before, or under an older key, and replaces each with its sealed
form: written beside it, fsynced, then renamed over it under the store lock, so a blob is
at every moment either its old complete bytes or its new ones. Interrupted, the walk is
simply run again. The codec itself is :mod:`agentctl.store.blob_sealing`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable

from agentctl.artifacts.layout import Layout, fsync_dir
from agentctl.store.blob_sealing import blob_is_sealed, blob_key_id, open_blob, seal_blob
from agentctl.store.keyring import Sealer

__all__ = ["blob_counts", "seal_blobs"]

_HEAD = 128


def _head(path: os.PathLike[str] | str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(_HEAD)


def blob_counts(layout: Layout) -> dict[str, int]:
    """``{"clear": n, KEY_ID: n, …}`` over every blob file (reads only their first bytes)."""
    counts: dict[str, int] = {"clear": 0}
    for _, path in layout.iter_blobs():
        head = _head(path)
        name = blob_key_id(head) if blob_is_sealed(head) else "clear"
        counts[name] = counts.get(name, 0) + 1
    return counts


def seal_blobs(
    layout: Layout,
    sealer: Sealer,
    *,
    batch: int = 50,
    after_batch: Callable[[], None] | None = None,
) -> int:
    """Seal every blob not sealed under ``sealer.active``; returns how many were."""
    assert sealer.active is not None
    done = 0
    pending = 0
    for _, path in list(layout.iter_blobs()):
        head = _head(path)
        if blob_is_sealed(head) and blob_key_id(head) == sealer.active:
            continue
        name = path.parent.name + path.name
        plain = open_blob(sealer, name, path.read_bytes())
        temp = layout.tmp / f"seal-{secrets.token_hex(8)}.part"
        layout.ensure()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            data = memoryview(seal_blob(sealer, name, plain))
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(temp, 0o400)
        with layout.locked():
            if path.exists():  # gc may have removed it meanwhile
                os.replace(temp, path)
            else:
                temp.unlink(missing_ok=True)
        fsync_dir(path.parent)
        done += 1
        pending += 1
        if pending >= batch and after_batch is not None:
            pending = 0
            after_batch()
    return done
