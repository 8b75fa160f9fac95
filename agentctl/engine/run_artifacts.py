"""The files a run's tasks write, as artifacts: ingested before a task commits, recorded
in its commit (docs/durable-execution.md, issue 7)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agentctl.compiler.plan import PlanTask
from agentctl.engine import budget
from agentctl.engine.signals import TaskFailure
from agentctl.ids import Clock
from agentctl.store.engine import Store

__all__ = ["RunArtifacts"]


class RunArtifacts:
    """One run's view of the content-addressed store (created on first use)."""

    def __init__(self, store: Store, clock: Clock, run_id: str) -> None:
        self.store = store
        # Where the run's own rows are written: the owner's fenced view once it claimed.
        self.writer: Any = store
        self.clock = clock
        self.run_id = run_id
        self._artifacts: Any = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def artifact_store(self) -> Any:
        """The store beside the database; for an in-memory database a temporary directory,
        removed by :meth:`close` when the execution ends."""
        if self._artifacts is None:
            from agentctl.artifacts import ArtifactStore

            if self.store.in_memory:
                self._tmp = tempfile.TemporaryDirectory(prefix="agentctl-artifacts-")
                self._artifacts = ArtifactStore(Path(self._tmp.name), self.store, self.clock)
            else:
                self._artifacts = ArtifactStore.beside(self.store, self.clock)
        return self._artifacts

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    async def ingest(
        self, task: PlanTask, attempt: int, written: list[tuple[str, Path]]
    ) -> list[tuple[str, Any]]:
        """Ingest the files a successful attempt wrote; their bytes count against
        ``maxArtifactBytes`` (a refusal fails the run and releases the leases)."""
        if not written:
            return []
        latest: dict[str, Path] = {}
        for name, path in written:
            latest[name] = path  # the last write of a path is the artifact
        names = [name for name in latest if latest[name].is_file()]
        store = self.artifact_store()
        blobs = await asyncio.to_thread(
            store.ingest_many, [latest[n] for n in names], holder=f"{self.run_id}/{task.id}"
        )
        total = sum(blob.size for blob in blobs)
        key = f"artifacts:{task.id}:{attempt}"
        with self.writer.write() as conn:
            now = self.clock.now()
            denied = budget.reserve(conn, self.run_id, key, {"artifactBytes": total}, now)
            if denied is not None:
                store.release(conn, blobs)
            else:
                budget.settle(conn, self.run_id, key, {"artifactBytes": total}, now)
        if denied is not None:
            raise TaskFailure(denied.message(), code="budget.exceeded", stops_run=True)
        return list(zip(names, blobs, strict=True))

    def record(
        self,
        conn: Any,
        task: PlanTask,
        ingested: list[tuple[str, Any]],
        *,
        input_digest: str | None,
        output_digest: str | None,
    ) -> list[dict[str, Any]]:
        """Refs (next version of each name) inside the task's commit; the manifest."""
        return [
            self.artifact_store()
            .record_ref(
                conn,
                blob,
                run_id=self.run_id,
                task_id=task.id,
                name=name,
                path=name,
                definition_fingerprint=task.definition_fingerprint,
                input_digest=input_digest,
                output_digest=output_digest,
            )
            .to_json()
            for name, blob in ingested
        ]
