"""The files a run's tasks write, as artifacts: ingested before a task commits, recorded
in its commit. Files a task writes through its tools are recorded under their path; the
files a task declares in ``artifacts`` are also recorded under their declared name, and
later tasks read those versions as ``tasks.<id>.artifacts.<name>``."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentctl.compiler.plan import PlanTask
from agentctl.compiler.task_parts import PlanArtifact
from agentctl.engine.effects import budget
from agentctl.ids import Clock
from agentctl.policy.paths import WorkspacePolicy
from agentctl.signals import TaskFailure
from agentctl.store.engine import Store

__all__ = ["IngestedFile", "RunArtifacts", "declared_files", "template_value"]


class RunArtifacts:
    """One run's view of the content-addressed store (created on first use)."""

    def __init__(self, store: Store, clock: Clock, run_id: str) -> None:
        self.store = store
        # Where the run's own rows are written: the owner's fenced view once it claimed.
        self.writer: Any = store
        # Whether the writer is a claimed task's (a PostgreSQL worker's): its artifacts'
        # bytes of an unlimited budget are then pending, not reserved (budget.charge).
        self.claimed = False
        self.clock = clock
        self.run_id = run_id
        self._artifacts: Any = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        # task id -> named artifact -> its newest version (loaded on first template use).
        self._named: dict[str, dict[str, dict[str, Any]]] | None = None

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
        self,
        task: PlanTask,
        attempt: int,
        written: list[tuple[str, Path]],
        workspace: WorkspacePolicy | None = None,
    ) -> list[IngestedFile]:
        """Ingest the files a successful attempt wrote, then the task's declared named
        artifacts; their bytes count against ``maxArtifactBytes`` (a refusal fails the run
        and releases the leases). A declared file that is not there fails the attempt with
        ``artifact.not_written``."""
        latest: dict[str, Path] = {}
        for name, path in written:
            latest[name] = path  # the last write of a path is the artifact
        files = [IngestedFile(name, name, None) for name in latest if latest[name].is_file()]
        sources = [latest[f.name] for f in files]
        if task.artifacts and workspace is not None:
            for declared, source in declared_files(task, workspace):
                files.append(IngestedFile(declared.name, declared.path, None, named=True))
                sources.append(source)
        if not files:
            return []
        store = self.artifact_store()
        blobs = await asyncio.to_thread(
            store.ingest_many, sources, holder=f"{self.run_id}/{task.id}"
        )
        for item, blob in zip(files, blobs, strict=True):
            item.blob = blob
        # A named artifact that is also a file the task wrote is counted once.
        total = sum(f.blob.size for f in files if not (f.named and f.path in latest))
        key = f"artifacts:{task.id}:{attempt}"
        with self.writer.write() as conn:
            now = self.clock.now()
            used = {"artifactBytes": total}
            denied = budget.charge(conn, self.run_id, key, used, now, claimed=self.claimed)
            if denied is not None:
                store.release(conn, blobs)
        if denied is not None:
            raise TaskFailure(denied.message(), code="budget.exceeded", stops_run=True)
        return files

    def record(
        self,
        conn: Any,
        task: PlanTask,
        ingested: list[IngestedFile],
        *,
        input_digest: str | None,
        output_digest: str | None,
    ) -> list[dict[str, Any]]:
        """Refs (next version of each name) inside the task's commit; the manifest."""
        manifest: list[dict[str, Any]] = []
        for item in ingested:
            ref = self.artifact_store().record_ref(
                conn,
                item.blob,
                run_id=self.run_id,
                task_id=task.id,
                name=item.name,
                path=item.path,
                definition_fingerprint=task.definition_fingerprint,
                input_digest=input_digest,
                output_digest=output_digest,
            )
            if item.named and self._named is not None:
                self._named.setdefault(task.id, {})[item.name] = template_value(ref)
            manifest.append(ref.to_json())
        return manifest

    def template_values(self, tasks: Mapping[str, PlanTask]) -> Mapping[str, Mapping[str, Any]]:
        """``tasks.<id>.artifacts.<name>`` for templates: the newest version of each named
        artifact this run recorded (or took over from its source run on retry/repair)."""
        if self._named is None:
            self._named = {}
            declared = {
                tid: {a.name for a in t.artifacts} for tid, t in tasks.items() if t.artifacts
            }
            if declared:
                for ref in self.artifact_store().refs(run_id=self.run_id):
                    if ref.name in declared.get(ref.task_id, ()):
                        self._named.setdefault(ref.task_id, {})[ref.name] = template_value(ref)
        return self._named


@dataclass(slots=True)
class IngestedFile:
    """One file of a successful attempt, published in the store, waiting for its ref."""

    name: str
    path: str
    blob: Any
    named: bool = False


def declared_files(task: PlanTask, workspace: WorkspacePolicy) -> list[tuple[PlanArtifact, Path]]:
    """The task's declared artifacts and the files behind them, or ``artifact.not_written``
    naming the first one the attempt did not leave in place."""
    found: list[tuple[PlanArtifact, Path]] = []
    for declared in task.artifacts:
        source = workspace.resolve_read(declared.path)
        if not source.is_file():
            state = "is not a regular file" if source.exists() else "does not exist"
            raise TaskFailure(
                f"task {task.id} succeeded but did not write its artifact `{declared.name}`: "
                f"{declared.path} {state} in the workspace {workspace.workspace_root}; "
                "make the task write the file there, or fix the declared path",
                code="artifact.not_written",
                details={"artifact": declared.name, "path": declared.path},
            )
        found.append((declared, source))
    return found


def template_value(ref: Any) -> dict[str, Any]:
    """What a template reads of one named artifact version."""
    return {"digest": ref.digest, "version": ref.version, "path": ref.path, "size": ref.size}
