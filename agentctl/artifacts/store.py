"""The content-addressed artifact store: one object the executor and the CLI talk to.

Ingestion, in order, and why each step comes where it does:

1. The file is hashed (and checked: regular, within the size cap).
2. A durable lease row (one hour) naming that digest is committed before any byte is
   written, so gc — which removes temporary files no live lease protects — never deletes
   bytes still being written, and from the moment the blob is visible under its name a
   live lease names it.
3. The file is streamed to ``tmp/<lease>.part`` while hashing again, then fsynced. If the
   second digest differs (the file changed meanwhile), the lease is re-pointed at the
   bytes actually copied (committed) before they are published.
4. Under the cross-process lock the temporary file is renamed to ``blobs/ab/cdef…``
   unless an intact blob is already there (deduplication: the copy is dropped). The
   existing blob is rehashed first: damaged bytes, even of the right size, are replaced.
5. :meth:`ArtifactStore.record_ref` runs inside the caller's task-completion transaction:
   it inserts the blob row if absent, the next version of the named ref, and deletes the
   lease — the ref takes over protecting the blob in the same commit.

A crash anywhere leaves either a temporary file under a lease (gc removes it once the
lease expires) or a complete blob (referenced, leased, or collected later). Nothing is
ever visible half-written.
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from agentctl.artifacts import catalog
from agentctl.artifacts.export import export_blob
from agentctl.artifacts.gc import collect, recover_quarantine
from agentctl.artifacts.ingest import FaultPoint, Staged, prehash, publish, stage
from agentctl.artifacts.integrity import blob_problem, check_refs
from agentctl.artifacts.layout import Layout, fsync_dir
from agentctl.artifacts.models import (
    ArtifactProblem,
    ArtifactRef,
    BlobInfo,
    ExportResult,
    GcReport,
    IngestedBlob,
    ProblemKind,
    VerifyReport,
)
from agentctl.errors import AgentctlError, NotFoundError, TaskError, UsageError
from agentctl.ids import Clock, IdGenerator
from agentctl.store import artifacts_repo, locks
from agentctl.store.location import artifact_root

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner, Store

__all__ = ["DEFAULT_GC_DAYS", "LEASE_SECONDS", "MAX_FILE_BYTES", "ArtifactStore"]

#: docs/artifacts.md: files auto-ingested from writable roots are capped at 16 MiB each.
MAX_FILE_BYTES = 16 * 1024 * 1024
#: How long an ingested blob stays protected before its ref must have committed.
LEASE_SECONDS = 3600.0
#: gc's grace period for unreferenced blobs (docs/cli-reference.md: ``--older-than-days`` default
#: 30).
DEFAULT_GC_DAYS = 30.0


class ArtifactStore:
    """Blobs under ``root`` (``artifacts/`` beside the database), rows in ``store``.

    Opening it finishes any gc that a crash interrupted (see :mod:`agentctl.artifacts.gc`):
    quarantined blobs are restored or deleted according to the database.
    """

    def __init__(
        self,
        root: Path,
        store: Store,
        clock: Clock,
        *,
        max_file_bytes: int = MAX_FILE_BYTES,
        lease_seconds: float = LEASE_SECONDS,
        faults: FaultPoint | None = None,
    ) -> None:
        self.layout = Layout(Path(root), sealer=store.sealer)
        self.store = store
        self.clock = clock
        self.max_file_bytes = max_file_bytes
        self.lease_seconds = lease_seconds
        self._faults = faults
        self._ids = IdGenerator(clock)
        self._ready = False
        if self.layout.quarantine.is_dir():
            with os.scandir(self.layout.quarantine) as entries:
                interrupted = any(entries)
            if interrupted:
                self.recover()

    @classmethod
    def beside(
        cls,
        store: Store,
        clock: Clock,
        *,
        max_file_bytes: int = MAX_FILE_BYTES,
        faults: FaultPoint | None = None,
    ) -> ArtifactStore:
        """The store of a database file: ``artifacts/`` next to it."""
        root = artifact_root(store.path)
        if root is None:
            raise UsageError(
                "an in-memory database has no artifact store",
                code="artifact.no_store",
                hint="pass --db with a database file",
            )
        return cls(root, store, clock, max_file_bytes=max_file_bytes, faults=faults)

    @property
    def root(self) -> Path:
        return self.layout.root

    # -- ingestion ----------------------------------------------------------------------

    def ingest(
        self, path: Path | str, *, holder: str, max_bytes: int | None = None
    ) -> IngestedBlob:
        """Copy one file into the store; it stays leased until :meth:`record_ref`.

        Raises ``TaskError`` (``artifact.too_large``, ``artifact.not_regular``,
        ``artifact.unreadable``) for files a task should not have produced, and
        ``artifact.lease_expired`` if the copy outlived its lease.
        """
        return self.ingest_many([path], holder=holder, max_bytes=max_bytes)[0]

    def ingest_many(
        self, paths: Sequence[Path | str], *, holder: str, max_bytes: int | None = None
    ) -> list[IngestedBlob]:
        """Ingest several files with one lease transaction (a task that wrote many files
        pays one commit, not one per file)."""
        if not paths:
            return []
        cap = self.max_file_bytes if max_bytes is None else max_bytes
        if not self._ready:
            self.layout.ensure()
            self._ready = True
        sources = [Path(p) for p in paths]
        expected = [prehash(source, cap) for source in sources]
        if self._faults is not None:
            self._faults.hit("artifact.hashed")
        lease_ids = [self._ids.new("lease") for _ in sources]
        now = self.clock.now()
        # Each ingestion writes its own lease rows only: scoped to no run, so it takes the
        # store lock shared (a GC batch, which decides on every lease, takes it whole).
        with self.store.write(locks.Locks()) as conn:
            artifacts_repo.insert_leases(
                conn,
                zip(lease_ids, (digest for digest, _ in expected), strict=True),
                holder,
                now,
                now + timedelta(seconds=self.lease_seconds),
            )
        staged: list[Staged] = []
        try:
            for source, lease_id in zip(sources, lease_ids, strict=True):
                staged.append(stage(self.layout, source, lease_id, cap, self._faults))
            changed = [
                item
                for item, (digest, _) in zip(staged, expected, strict=True)
                if item.digest != digest
            ]
            if changed:
                self._bind(changed)
            folders: set[Path] = set()
            with self.layout.locked():
                for item in staged:
                    folders.add(publish(self.layout, item))
            for folder in folders:
                fsync_dir(folder)
        except BaseException:
            for item in staged:
                item.temp.unlink(missing_ok=True)
            # Best effort: an unreleased lease only delays gc by its hour.
            with contextlib.suppress(AgentctlError), self.store.write(locks.Locks()) as conn:
                artifacts_repo.delete_leases(conn, lease_ids)
            raise
        return [IngestedBlob(item.digest, item.size, item.lease_id) for item in staged]

    def _bind(self, staged: list[Staged]) -> None:
        """Re-point leases at the bytes actually copied, before those are published."""
        with self.store.write(locks.Locks()) as conn:
            now = self.clock.now()
            for item in staged:
                if not catalog.bind_lease(conn, item.lease_id, item.digest, now):
                    raise TaskError(
                        f"the ingestion lease {item.lease_id} expired before its bytes "
                        "were published",
                        code="artifact.lease_expired",
                        hint="retry the task; ingestion must finish within the lease hour",
                    )

    def record_ref(
        self,
        conn: SqlRunner,
        blob: IngestedBlob,
        *,
        run_id: str,
        task_id: str,
        name: str,
        path: str | None = None,
        definition_fingerprint: str | None = None,
        input_digest: str | None = None,
        output_digest: str | None = None,
    ) -> ArtifactRef:
        """Record the next version of ``name`` inside the caller's write transaction and
        release the blob's lease in it, so the ref commits with the task completion.

        If the lease lapsed, the bytes are still accepted when the blob file exists: gc
        quarantines inside its own write transaction, so this one sees a consistent state.
        """
        now = self.clock.now()
        lease = artifacts_repo.lease(conn, blob.lease_id)
        protected = lease is not None and lease.expires_at > now and lease.digest == blob.digest
        if not protected and not self.layout.blob_path(blob.digest).is_file():
            raise TaskError(
                f"artifact {blob.digest} for {name!r} was collected after its ingestion "
                f"lease {blob.lease_id} expired",
                code="artifact.lease_expired",
                hint="retry the task; its files are ingested again",
            )
        media_type = mimetypes.guess_type(path or name)[0]
        artifacts_repo.insert_blob(conn, blob.digest, blob.size, media_type, now)
        ref = artifacts_repo.insert_ref(
            conn,
            digest=blob.digest,
            run_id=run_id,
            task_id=task_id,
            name=name,
            path=path,
            definition_fingerprint=definition_fingerprint,
            input_digest=input_digest,
            output_digest=output_digest,
            now=now,
        )
        artifacts_repo.delete_leases(conn, [blob.lease_id])
        return ref

    def release(self, conn: SqlRunner, blobs: Iterable[IngestedBlob]) -> None:
        """Drop the leases of ingested blobs that will not be recorded (the task failed),
        so gc may reclaim them without waiting for the hour."""
        artifacts_repo.delete_leases(conn, [blob.lease_id for blob in blobs])

    # -- reading ------------------------------------------------------------------------

    def refs(
        self, *, run_id: str | None = None, task_id: str | None = None, name: str | None = None
    ) -> list[ArtifactRef]:
        with self.store.read() as conn:
            return artifacts_repo.refs(conn, run_id=run_id, task_id=task_id, name=name)

    def versions(self, name: str) -> list[ArtifactRef]:
        """Every version of the artifact ``name``, oldest first."""
        return self.refs(name=name)

    def latest(self, name: str) -> ArtifactRef | None:
        with self.store.read() as conn:
            return artifacts_repo.latest_ref(conn, name)

    def _resolve(self, conn: SqlRunner, text: str) -> str:
        digest = catalog.resolve_digest(conn, text)
        if digest is not None and (
            artifacts_repo.blob(conn, digest) is not None or self.layout.blob_path(digest).is_file()
        ):
            return digest
        raise NotFoundError(
            f"unknown artifact {text!r}",
            code="artifact.not_found",
            hint="list artifacts with `agentctl artifacts list`, or pass the right --db",
        )

    def resolve(self, text: str) -> str:
        """The full ``sha256:<hex>`` for a digest or unique prefix; exit 5 if unknown."""
        with self.store.read() as conn:
            return self._resolve(conn, text)

    def inspect(self, text: str) -> BlobInfo:
        with self.store.read() as conn:
            digest = self._resolve(conn, text)
            row = artifacts_repo.blob(conn, digest)
            refs = artifacts_repo.refs(conn, digest=digest)
            leases = artifacts_repo.leases_for_blob(conn, digest)
        blob = self.layout.blob_path(digest)
        size = row.size if row is not None else blob.stat().st_size if blob.is_file() else None
        return BlobInfo(
            digest=digest,
            size=size,
            media_type=None if row is None else row.media_type,
            created_at=None if row is None else row.created_at,
            verified_at=None if row is None else row.verified_at,
            tracked=row is not None,
            present=blob.is_file(),
            path=str(blob),
            refs=refs,
            leases=leases,
        )

    # -- integrity ----------------------------------------------------------------------

    def verify(self, text: str | None = None) -> VerifyReport:
        """Rehash one blob (``text``) or every blob, tracked or not; record ``verified_at``
        on the intact ones. Problems name the refs that point at the damaged bytes."""
        with self.store.read() as conn:
            if text is not None:
                digest = self._resolve(conn, text)
                row = artifacts_repo.blob(conn, digest)
                rows = [] if row is None else [row]
                targets: dict[str, int | None] = {digest: None}
            else:
                rows = artifacts_repo.all_blobs(conn)
                targets = {digest: None for digest, _ in self.layout.iter_blobs()}
            targets.update({row.digest: row.size for row in rows})
            problems: list[ArtifactProblem] = []
            intact: list[str] = []
            for digest, size in sorted(targets.items()):
                found = blob_problem(self.layout, digest, size)
                if found is None:
                    intact.append(digest)
                    continue
                refs = artifacts_repo.refs(conn, digest=digest)
                problems.extend(self._problems(digest, found, refs))
        if intact:
            with self.store.write() as conn:
                artifacts_repo.mark_verified(conn, intact, self.clock.now())
        return VerifyReport(checked=len(targets), ok=len(intact), problems=problems)

    def _problems(
        self, digest: str, found: tuple[ProblemKind, str], refs: list[ArtifactRef]
    ) -> list[ArtifactProblem]:
        if refs:
            return check_refs(self.layout, refs)
        kind, message = found
        return [ArtifactProblem(digest, kind, message, str(self.layout.blob_path(digest)))]

    def reuse_check(self, conn: SqlRunner, refs: Iterable[ArtifactRef]) -> list[ArtifactProblem]:
        """Problems that must block reusing ``refs`` (retry/repair call this before they
        create a run): a blob row gone from ``conn``'s database, or bytes that are missing
        or no longer hash to their digest."""
        present: list[ArtifactRef] = []
        problems: list[ArtifactProblem] = []
        for ref in refs:
            if artifacts_repo.blob(conn, ref.digest) is None:
                problems.append(
                    ArtifactProblem(
                        digest=ref.digest,
                        kind="missing",
                        message=f"artifact {ref.digest} ({ref.name!r} v{ref.version} of task "
                        f"{ref.task_id}, run {ref.run_id}) is not in the database",
                        path=str(self.layout.blob_path(ref.digest)),
                        run_id=ref.run_id,
                        task_id=ref.task_id,
                        name=ref.name,
                        version=ref.version,
                    )
                )
                continue
            present.append(ref)
        return problems + check_refs(self.layout, present)

    # -- export and gc ------------------------------------------------------------------

    def export(
        self,
        text: str,
        dest: Path | str,
        *,
        base: Path | None = None,
        overwrite: bool = False,
        confine: bool = True,
    ) -> ExportResult:
        """Write the blob to ``dest`` (relative to ``base``, default the current directory),
        atomically, refusing silent overwrite; with ``confine`` (a destination that is not
        the operator's own) also traversal and symlink escape out of ``base``."""
        digest = self.resolve(text)
        return export_blob(
            self.layout,
            digest,
            Path(dest),
            base=base or Path.cwd(),
            overwrite=overwrite,
            confine=confine,
        )

    def gc(self, *, older_than_days: float = DEFAULT_GC_DAYS, dry_run: bool = False) -> GcReport:
        if older_than_days < 0:
            raise UsageError(
                f"--older-than-days must be 0 or more, not {older_than_days}",
                hint="e.g. --older-than-days 30",
            )
        return collect(
            self.layout,
            self.store,
            self.clock.now(),
            older_than_days=older_than_days,
            dry_run=dry_run,
            faults=self._faults,
        )

    def recover(self) -> tuple[list[str], list[str]]:
        """Finish an interrupted gc: ``(restored, purged)`` digests."""
        with self.layout.locked():
            return recover_quarantine(self.layout, self.store, self.clock.now())
