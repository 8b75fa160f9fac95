"""The operator half of :class:`agentctl.Runtime`: the database itself (migrate, stats,
check) and the processes that serve it (a worker, waiting for a run).
:class:`agentctl.Runtime` inherits these methods; this module is internal, use the facade.

Each method opens the store, calls one store or engine operation and closes it again, like
the rest of the facade; the records it returns are the documents the matching ``agentctl
db`` command prints with ``--output json`` (``to_json()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentctl.artifacts import ArtifactRef, ArtifactStore
    from agentctl.engine.dbcheck import DatabaseCheck
    from agentctl.engine.worker import WorkerReport
    from agentctl.ids import Clock
    from agentctl.memory import GcReport, LongTermMemory
    from agentctl.results import EventSink
    from agentctl.runtime_views import RegisteredWorkflow, WorkflowRegistry
    from agentctl.store.stats import DatabaseStats

__all__ = [
    "AdminOperations",
    "DbMigration",
    "EncryptionInventory",
    "EncryptionKey",
    "EncryptionMigration",
    "SealedColumn",
]

#: A worker's default number of runs and tasks in hand at once (``agentctl worker``).
WORKER_CONCURRENCY = 4


@dataclass(frozen=True, slots=True)
class DbMigration:
    """What ``db migrate`` did: the database (a URL without its password), its schema
    revision before (None: an empty database) and after, and whether it changed."""

    path: str
    from_revision: str | None
    to_revision: str | None

    @property
    def changed(self) -> bool:
        return self.from_revision != self.to_revision

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "fromRevision": self.from_revision,
            "toRevision": self.to_revision,
            "changed": self.changed,
        }


@dataclass(frozen=True, slots=True)
class EncryptionKey:
    """A key the database knows (by id and the variable named at enable, never its
    bytes): ``active`` seals new writes, ``retired`` only opens what it sealed."""

    key_id: str
    key_env: str
    status: str
    created_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "keyId": self.key_id,
            "keyEnv": self.key_env,
            "status": self.status,
            "createdAt": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class SealedColumn:
    """One payload column: how many values are clear, and how many each key sealed."""

    table: str
    column: str
    clear: int
    sealed: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "column": self.column,
            "clear": self.clear,
            "sealed": dict(self.sealed),
        }


@dataclass(frozen=True, slots=True)
class EncryptionInventory:
    """``db encryption inventory``: what is sealed under which key and what is still
    clear, the payload columns and (``blobs``, None without an artifact root) the artifact
    bytes. Counted without any key."""

    enabled: bool
    active_key_id: str | None
    keys: tuple[EncryptionKey, ...]
    columns: tuple[SealedColumn, ...]
    clear_values: int
    sealed_values: int
    blobs: dict[str, int] | None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "enabled": self.enabled,
            "activeKeyId": self.active_key_id,
            "keys": [key.to_json() for key in self.keys],
            "columns": [column.to_json() for column in self.columns],
            "clearValues": self.clear_values,
            "sealedValues": self.sealed_values,
        }
        if self.blobs is not None:
            document["blobs"] = dict(self.blobs)
        return document


@dataclass(frozen=True, slots=True)
class EncryptionMigration:
    """What ``db encryption enable|rotate`` did (or, ``dry_run``, would do): values to seal
    before, values sealed, batches, what is left clear or under another key, and artifact
    blobs sealed. ``values_sealed`` and ``batches`` are 0 on a dry run, and the counts
    after it (``clear_values_left``, ``other_key_values_left``) are None."""

    operation: str
    key_id: str
    key_env: str
    previous_key_id: str | None
    dry_run: bool
    values_to_seal: int
    values_sealed: int
    batches: int
    clear_values_left: int | None
    other_key_values_left: int | None
    blobs_sealed: int

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "operation": self.operation,
            "keyId": self.key_id,
            "keyEnv": self.key_env,
            "previousKeyId": self.previous_key_id,
            "dryRun": self.dry_run,
            "valuesToSeal": self.values_to_seal,
            "valuesSealed": self.values_sealed,
            "batches": self.batches,
        }
        if not self.dry_run:
            document["clearValuesLeft"] = self.clear_values_left
            document["otherKeyValuesLeft"] = self.other_key_values_left
        document["blobsSealed"] = self.blobs_sealed
        return document


class AdminOperations:
    """``agentctl db``'s operations, the worker and the wait for a run; the state they use
    (``db``, ``clock``, ``on_event``, ``handle_signals``) is the facade's."""

    db: str
    handle_signals: bool
    on_event: EventSink | None

    if TYPE_CHECKING:
        # Declared for the type checker only: Runtime defines it.
        @property
        def clock(self) -> Clock: ...

    # -- the database --------------------------------------------------------------------

    def migrate(self) -> DbMigration:
        """Upgrade the database to this release's schema (opening it does too). A database
        a newer release wrote is refused and left unchanged; a PostgreSQL database must
        exist already."""
        from agentctl.store import migrate as migrations
        from agentctl.store.engine import open_store

        with open_store(self.db, migrate_schema=False) as store:
            before = store.revision()
            with store.write() as conn:
                migrations.require_known_revision(migrations.current_revision(conn), store.path)
                migrations.upgrade(conn)
            return DbMigration(store.path, before, store.revision())

    def stats(self) -> DatabaseStats:
        """The schema revision, the record counts, the database's and its WAL's size."""
        from agentctl.store.engine import open_store
        from agentctl.store.stats import database_stats

        with open_store(self.db, create=False) as store:
            return database_stats(store)

    def check_database(self) -> DatabaseCheck:
        """SQLite integrity, foreign keys, audit chains and artifact bytes, check by check
        (``ok`` when all are sound). A database found corrupt while it is read is marked
        damaged, so no run starts on it until a later check finds it sound, and the error
        is raised."""
        from agentctl.engine.dbcheck import check_database
        from agentctl.errors import PersistenceError
        from agentctl.store.engine import open_store

        with open_store(self.db, migrate_schema=False, create=False) as store:
            try:
                return check_database(store, self.clock)
            except PersistenceError as exc:
                if exc.code != "store.corrupt":
                    raise
                from agentctl.store.health import mark_damaged

                mark_damaged(self.db, [exc.message])
                raise

    # -- encryption at rest (docs/encryption.md) ------------------------------------------

    def encryption_inventory(self) -> EncryptionInventory:
        """Which payload columns and artifact blobs are sealed, under which key ids, and
        what is still clear; needs no key (values are counted, never opened)."""
        from agentctl.store.encryption_repo import inventory
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            data = inventory(store)
            layout = _artifact_layout(store)
        blobs: dict[str, int] | None = None
        if layout is not None:
            from agentctl.artifacts.sealing import blob_counts

            blobs = dict(blob_counts(layout))
        return EncryptionInventory(
            enabled=bool(data["enabled"]),
            active_key_id=data["activeKeyId"],
            keys=tuple(
                EncryptionKey(k["keyId"], k["keyEnv"], k["status"], k["createdAt"])
                for k in data["keys"]
            ),
            columns=tuple(
                SealedColumn(c["table"], c["column"], c["clear"], dict(c["sealed"]))
                for c in data["columns"]
            ),
            clear_values=int(data["clearValues"]),
            sealed_values=int(data["sealedValues"]),
            blobs=blobs,
        )

    def encrypt(
        self, key_id: str, key_env: str, *, rotating: bool = False, dry_run: bool = False
    ) -> EncryptionMigration:
        """Seal every payload and artifact blob under ``key_id`` (its base64 32-byte key in
        the variable ``key_env``), then every new write: ``enable``, or with ``rotating``
        re-seal what an earlier key sealed (``rotate``). Works in short batches, each
        committed, so an interrupted call is finished by calling it again."""
        from agentctl.engine.core.faults import Faults
        from agentctl.store.encryption_repo import seal_under
        from agentctl.store.engine import open_store

        faults = Faults()
        with open_store(self.db, create=False) as store:
            data = seal_under(
                store,
                key_id,
                key_env,
                rotating=rotating,
                dry_run=dry_run,
                after_batch=lambda: faults.hit("encryption.batch"),
            )
            layout = _artifact_layout(store)
            blobs_sealed = 0
            if layout is not None and not dry_run:
                from agentctl.artifacts.sealing import seal_blobs

                blobs_sealed = seal_blobs(
                    layout, store.sealer, after_batch=lambda: faults.hit("encryption.batch")
                )
        return EncryptionMigration(
            operation=data["operation"],
            key_id=data["keyId"],
            key_env=data["keyEnv"],
            previous_key_id=data["previousKeyId"],
            dry_run=bool(data["dryRun"]),
            values_to_seal=int(data["valuesToSeal"]),
            values_sealed=int(data["valuesSealed"]),
            batches=int(data["batches"]),
            clear_values_left=data.get("clearValuesLeft"),
            other_key_values_left=data.get("otherKeyValuesLeft"),
            blobs_sealed=blobs_sealed,
        )

    # -- serving -------------------------------------------------------------------------

    def serve(
        self, *, name: str, concurrency: int = WORKER_CONCURRENCY, recover_interrupted: bool = False
    ) -> WorkerReport:
        """Be a worker of this PostgreSQL database named ``name``: claim runs and tasks
        (``concurrency`` at once) until stopped; each step is reported to ``on_event``.
        With ``handle_signals``, SIGINT and SIGTERM drain (no new claims; the runs and tasks
        in hand finish or park) and this returns. A mistyped database is refused, never
        created."""
        import asyncio
        import signal

        from agentctl.engine.worker import Worker
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            worker = Worker(
                store,
                name=name,
                concurrency=concurrency,
                clock=self.clock,
                events=self.on_event,
                recover_interrupted=recover_interrupted,
            )
            handled = (signal.SIGINT, signal.SIGTERM) if self.handle_signals else ()

            async def main() -> None:
                loop = asyncio.get_running_loop()
                for sig in handled:
                    loop.add_signal_handler(sig, worker.stop)
                try:
                    await worker.serve()
                finally:
                    for sig in handled:
                        loop.remove_signal_handler(sig)

            asyncio.run(main())
        return worker.report

    def wait(self, run_id: str) -> str:
        """Block until ``run_id`` is finished or parked; its state (a ``RunState`` value).
        On PostgreSQL a notification wakes the wait at once; on SQLite the run is looked at
        twice a second."""
        import asyncio

        from agentctl.engine.worker import wait_for_run
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return asyncio.run(wait_for_run(store, run_id))

    # -- long-term memory ----------------------------------------------------------------

    @contextmanager
    def long_term_memory(self, namespace: str, *, create: bool = False) -> Iterator[LongTermMemory]:
        """The database's long-term memory, open for the block (``agentctl memory``), with
        the local embedder of the dimensions ``namespace``'s entries were written with.
        ``create`` makes the database when it is missing (a write); reads refuse it."""
        from agentctl.memory import DEFAULT_DIMENSIONS, LocalHashEmbedder, LongTermMemory
        from agentctl.store.engine import open_store

        with open_store(self.db, create=create) as store:
            memory = LongTermMemory(store, self.clock, LocalHashEmbedder(DEFAULT_DIMENSIONS))
            spaces = memory.embedding_models(namespace)
            local = sorted(model for model in spaces if model.startswith("local_hash@"))
            if local:
                dimensions = int(local[0].rsplit("@", 1)[1])
                memory.embedder = LocalHashEmbedder(dimensions)
            yield memory

    def collect_garbage(self, *, older_than_days: int, dry_run: bool = False) -> GcReport:
        """Remove expired long-term memory entries and the terminal runs last updated
        more than ``older_than_days`` ago (``agentctl gc``); ``dry_run`` only counts them."""
        from agentctl.memory import collect_garbage
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return collect_garbage(
                store, self.clock.now(), older_than_days=older_than_days, dry_run=dry_run
            )

    # -- artifacts -----------------------------------------------------------------------

    @contextmanager
    def artifact_store(self) -> Iterator[ArtifactStore]:
        """The content-addressed artifact store beside the database, open for the block
        (``agentctl artifacts``)."""
        from agentctl.artifacts import ArtifactStore
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            yield ArtifactStore.beside(store, self.clock)

    def artifacts(
        self, *, run_id: str | None = None, task_id: str | None = None, name: str | None = None
    ) -> list[ArtifactRef]:
        """Artifact versions, of one run, task or name (``artifacts list``); an unknown
        ``run_id`` raises :class:`~agentctl.errors.NotFoundError`."""
        from agentctl.store.records import get_run

        with self.artifact_store() as found:
            if run_id is not None:
                with found.store.read() as conn:
                    get_run(conn, run_id)
            return found.refs(run_id=run_id, task_id=task_id, name=name)

    # -- the workflow registry -----------------------------------------------------------

    def workflows(self, *, missing_ok: bool = False) -> WorkflowRegistry:
        """Every workflow of the registry (``$AGENTCTL_WORKFLOW_PATH``, the project's
        config, else its workflow folders) with its newest run in this database. With
        ``missing_ok`` a database that does not exist yet lists them as never run instead
        of raising."""
        from agentctl.runtime_views import WorkflowRegistry
        from agentctl.scheduling.registry import discover, search_path

        found = self._with_last_runs(discover(), missing_ok=missing_ok)
        return WorkflowRegistry(found, search_path())

    def workflow(self, name: str, *, missing_ok: bool = False) -> RegisteredWorkflow:
        """The one registered workflow answering to ``name`` (a ``UsageError`` when none or
        several do), with its newest run, as :meth:`workflows` gives it."""
        from agentctl.scheduling.registry import find_workflow

        return self._with_last_runs([find_workflow(name)], missing_ok=missing_ok)[0]

    @staticmethod
    def resolve_workflow(argument: str) -> str:
        """The workflow file a command's WORKFLOW argument means: a path as given, else the
        file of the registered workflow answering to that name (its ``metadata.name`` or
        file stem); an unknown or ambiguous name raises ``UsageError``. Opens no database."""
        from agentctl.scheduling.registry import resolve_workflow

        return resolve_workflow(argument)

    def _with_last_runs(self, entries: list[Any], *, missing_ok: bool) -> list[RegisteredWorkflow]:
        from agentctl.errors import PersistenceError
        from agentctl.runtime_views import RegisteredWorkflow
        from agentctl.scheduling.catalog import last_runs
        from agentctl.store.engine import open_store

        try:
            with open_store(self.db, create=False) as store:
                latest = last_runs(store, [entry.name for entry in entries])
        except PersistenceError as error:
            if error.code != "store.missing" or not missing_ok:
                raise
            latest = {}
        return [RegisteredWorkflow(entry, latest.get(entry.name)) for entry in entries]


def _artifact_layout(store: Any) -> Any:
    """The database's artifact root with the store's key ring, None when it has none."""
    from agentctl.artifacts.layout import Layout
    from agentctl.store.location import artifact_root

    root = artifact_root(store.path if store.dialect == "sqlite" else store.location)
    if root is None or not root.is_dir():
        return None
    return Layout(root, sealer=store.sealer)
