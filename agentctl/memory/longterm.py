"""Long-term memory: namespaced typed entries with retention and three search modes.

``LongTermMemory`` is what the executor and the CLI call. Writes validate and embed
*before* the IMMEDIATE transaction (an embedding request may take seconds and must not
hold the write lock), then upsert the row; triggers update the FTS index and the
namespace generation in that same transaction. Reads treat an expired entry as absent
even before ``gc`` removes it.

For the executor, each operation has an effect input and a task output (docs/actions.md,
docs/durable-execution.md):

- read: ``{namespace, key}`` -> ``read(namespace, key)``;
- write: ``prepare_write(...)`` -> ``MemoryWrite.effect_input()`` then ``write(prepared)``;
- search: ``SearchQuery.build(...)`` (its ``to_json()`` is the effect input) ->
  ``retrieve(query)``; the journaled ``SearchResult.to_json()`` is replayed with
  ``SearchResult.from_json`` and needs neither the store nor the embedder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic.dataclasses import dataclass as record

from agentctl.digest import canonical_json
from agentctl.errors import NotFoundError
from agentctl.ids import Clock
from agentctl.memory.embedders import Embedder, Vectors
from agentctl.memory.entries import (
    MemoryEntry,
    MemoryRecord,
    ZuluTime,
    expiry_for,
    validate_key,
    validate_namespace,
)
from agentctl.memory.fusion import reciprocal_rank_fusion
from agentctl.memory.query import MAX_LIMIT, SearchHit, SearchMode, SearchQuery, SearchResult
from agentctl.memory.text_index import RankedId, text_search
from agentctl.memory.vector_index import VectorIndex
from agentctl.store import memory_repo
from agentctl.store.timestamps import to_iso, utc
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner, Store

__all__ = ["LongTermMemory", "MemoryWrite", "ReindexReport", "WriteOutput", "WriteResult"]

_REINDEX_BATCH = 512
#: Expired entries deleted per transaction by ``gc``: each delete also updates the FTS
#: index, and a long delete would hold the write lock against running work.
GC_BATCH = 500


@record(frozen=True, slots=True, config=CAMEL)
class MemoryWrite(CamelRecord):
    """A validated write with its expiry fixed: the effect input is known before dispatch."""

    namespace: str
    key: str
    entry: MemoryEntry
    expires_at: ZuluTime | None

    def effect_input(self) -> dict[str, Any]:
        """``{namespace, key, entry, expiresAt}``: the write's effect input."""
        return self.to_json()


@record(frozen=True, slots=True, config=CAMEL)
class WriteOutput(CamelRecord):
    """The output of ``builtin.long_term_memory.write`` (docs/actions.md)."""

    namespace: str
    key: str
    entry: MemoryEntry
    embedding_provider: str
    embedding_dimensions: int
    expires_at: ZuluTime | None
    status: Literal["changed"] = "changed"
    changed: Literal[True] = True

    _order = keys_in_order("status", "changed")


@dataclass(frozen=True, slots=True)
class WriteResult:
    write: MemoryWrite
    embedding_provider: str
    embedding_dimensions: int
    created: bool

    def to_json(self) -> dict[str, Any]:
        """The task output: the write, its embedding and its expiry (:class:`WriteOutput`)."""
        write = self.write
        output = WriteOutput(
            write.namespace,
            write.key,
            write.entry,
            self.embedding_provider,
            self.embedding_dimensions,
            write.expires_at,
        )
        return output.to_json()


@record(frozen=True, slots=True, config=CAMEL)
class ReindexReport(CamelRecord):
    namespace: str
    entries: int
    embedding_model: str


class LongTermMemory:
    """The long-term store over one database, one clock and one embedder."""

    def __init__(self, store: Store, clock: Clock, embedder: Embedder) -> None:
        self.store = store
        self.clock = clock
        self.embedder = embedder
        self._vectors = VectorIndex()

    # -- writing -------------------------------------------------------------------------

    def prepare_write(
        self,
        namespace: str,
        key: str,
        entry: MemoryEntry | Mapping[str, Any],
        *,
        retention_days: int | None = None,
    ) -> MemoryWrite:
        """Validate a write and fix its expiry (``now + retention_days``) from the clock."""
        if not isinstance(entry, MemoryEntry):
            entry = MemoryEntry.from_json(entry)
        return MemoryWrite(
            namespace=validate_namespace(namespace),
            key=validate_key(key),
            entry=entry,
            expires_at=expiry_for(self.clock.now(), retention_days),
        )

    def write(
        self, prepared: MemoryWrite, *, provenance: Mapping[str, Any] | None = None
    ) -> WriteResult:
        """Upsert the entry (created_at survives an overwrite); embed first, then write."""
        vector = self.embedder.embed([prepared.entry.searchable_text])[0]
        values = self._values(prepared, vector, provenance)
        with self.store.write() as conn:
            existed = memory_repo.entry_exists(conn, prepared.namespace, prepared.key)
            memory_repo.upsert_entries(conn, [values], self.clock.now())
        return WriteResult(
            write=prepared,
            embedding_provider=self.embedder.provider,
            embedding_dimensions=int(vector.shape[0]),
            created=not existed,
        )

    def put(
        self,
        namespace: str,
        key: str,
        entry: MemoryEntry | Mapping[str, Any],
        *,
        retention_days: int | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """Validate, embed and upsert in one call (the CLI's ``memory put``)."""
        prepared = self.prepare_write(namespace, key, entry, retention_days=retention_days)
        return self.write(prepared, provenance=provenance)

    def put_many(
        self,
        namespace: str,
        entries: Sequence[tuple[str, MemoryEntry | Mapping[str, Any]]],
        *,
        retention_days: int | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> int:
        """Upsert many entries of one namespace in one transaction (imports, benchmarks).

        All entries are validated and embedded (in one batch) before the transaction
        starts, so a bad entry writes none of them. Returns the number written.
        """
        prepared = [
            self.prepare_write(namespace, key, entry, retention_days=retention_days)
            for key, entry in entries
        ]
        if not prepared:
            return 0
        vectors = self.embedder.embed([item.entry.searchable_text for item in prepared])
        rows = [
            self._values(item, vector, provenance)
            for item, vector in zip(prepared, vectors, strict=True)
        ]
        with self.store.write() as conn:
            memory_repo.upsert_entries(conn, rows, self.clock.now())
        return len(rows)

    def _values(
        self,
        prepared: MemoryWrite,
        vector: Vectors,
        provenance: Mapping[str, Any] | None,
    ) -> memory_repo.EntryValues:
        entry = prepared.entry
        return memory_repo.EntryValues(
            namespace=prepared.namespace,
            key=prepared.key,
            value_type=entry.value_type,
            value_json=canonical_json(dict(entry.content)),
            text=entry.searchable_text,
            metadata_json=canonical_json(dict(entry.metadata)),
            embedding=vector.astype("<f4").tobytes(),
            embedding_model=self.embedder.identity,
            provenance_json=None if provenance is None else canonical_json(dict(provenance)),
            expires_at=prepared.expires_at,
        )

    def delete(self, namespace: str, key: str) -> bool:
        """Remove an entry; True when one was there (expired or not)."""
        with self.store.write() as conn:
            return memory_repo.delete_entry(conn, namespace, key)

    # -- reading -------------------------------------------------------------------------

    def get(self, namespace: str, key: str) -> MemoryRecord | None:
        """The live entry, or None when it is absent or expired."""
        validate_namespace(namespace)
        validate_key(key)
        with self.store.read() as conn:
            row = memory_repo.entry(conn, namespace, key)
        if row is None:
            return None
        record = MemoryRecord.from_row(row)
        if record.expires_at is not None and record.expires_at <= utc(self.clock.now()):
            return None
        return record

    def require(self, namespace: str, key: str) -> MemoryRecord:
        """Like ``get``, but a missing or expired key is ``NotFoundError`` (exit 5)."""
        record = self.get(namespace, key)
        if record is None:
            raise NotFoundError(
                f"memory namespace {namespace!r} has no live key {key!r}",
                code="memory.not_found",
                hint=f"search it with `agentctl memory search {namespace} QUERY`",
            )
        return record

    def read(self, namespace: str, key: str) -> dict[str, Any]:
        """The output of ``builtin.long_term_memory.read``: absent is not an error
        (docs/actions.md)."""
        record = self.get(namespace, key)
        return {
            "status": "unchanged",
            "changed": False,
            "value": None if record is None else record.entry.value,
            "record": None if record is None else record.to_json(),
        }

    # -- searching -----------------------------------------------------------------------

    def search(
        self,
        namespace: str,
        query: str,
        *,
        mode: SearchMode = "text",
        limit: int = 10,
        filters: Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Search one namespace (validates the arguments like the search action does)."""
        built = SearchQuery.build(namespace, query, mode=mode, limit=limit, filters=filters)
        return self.retrieve(built)

    def retrieve(self, query: SearchQuery) -> SearchResult:
        """Run a normalized query: the dispatch of a ``builtin.long_term_memory.search``."""
        query_vector = None
        if query.mode != "text":
            query_vector = self.embedder.embed([query.text])[0]
        now = self.clock.now()
        with self.store.read() as conn:
            ranked = self._rank(conn, query, query_vector, now)
            hits = self._hits(conn, ranked)
        model = None if query_vector is None else self.embedder.identity
        return SearchResult(query=query, hits=tuple(hits), embedding_model=model)

    def _rank(
        self, conn: SqlRunner, query: SearchQuery, query_vector: Vectors | None, now: datetime
    ) -> list[RankedId]:
        if query_vector is None:  # text mode: the embedder is never called
            return text_search(conn, query.namespace, query.text, now, query.filters, query.limit)
        by_vector = self._vectors.search(
            conn,
            query.namespace,
            self.embedder.identity,
            query_vector,
            now,
            query.filters,
            query.limit if query.mode == "vector" else MAX_LIMIT,
        )
        if query.mode == "vector":
            return by_vector
        by_text = text_search(conn, query.namespace, query.text, now, query.filters, MAX_LIMIT)
        return reciprocal_rank_fusion([by_text, by_vector])[: query.limit]

    @staticmethod
    def _hits(conn: SqlRunner, ranked: Sequence[RankedId]) -> list[SearchHit]:
        if not ranked:
            return []
        rows = memory_repo.entries_by_id(conn, [item.entry_id for item in ranked])
        hits = []
        for item in ranked:
            record = MemoryRecord.from_row(rows[item.entry_id])
            hits.append(
                SearchHit(
                    namespace=record.namespace,
                    key=record.key,
                    score=item.score,
                    entry=record.entry.to_json(),
                    updated_at=to_iso(record.updated_at),
                    expires_at=to_iso(record.expires_at),
                )
            )
        return hits

    # -- maintenance ---------------------------------------------------------------------

    def reindex(self, namespace: str) -> ReindexReport:
        """Re-embed every entry of ``namespace`` with this embedder; rebuild the FTS index.

        Embedding happens outside the write transaction; a row whose text changed in the
        meantime keeps its newer embedding (the update matches on the text it embedded).
        """
        validate_namespace(namespace)
        with self.store.read() as conn:
            rows = memory_repo.entry_texts(conn, namespace)
        updates: list[tuple[memory_repo.EntryText, bytes]] = []
        for start in range(0, len(rows), _REINDEX_BATCH):
            batch = rows[start : start + _REINDEX_BATCH]
            vectors = self.embedder.embed([row.text or "" for row in batch])
            updates.extend(
                (row, vector.astype("<f4").tobytes())
                for row, vector in zip(batch, vectors, strict=True)
            )
        identity = self.embedder.identity
        with self.store.write() as conn:
            memory_repo.set_embeddings(conn, namespace, updates, identity)
            memory_repo.rebuild_text_index(conn)
        return ReindexReport(namespace=namespace, entries=len(rows), embedding_model=identity)

    def embedding_models(self, namespace: str) -> dict[str, int]:
        """How many entries of ``namespace`` each embedding space holds."""
        with self.store.read() as conn:
            return memory_repo.embedding_counts(conn, namespace)

    def gc(self, now: datetime, *, batch_size: int = GC_BATCH) -> int:
        """Delete entries whose expiry is at or before ``now``, ``batch_size`` per
        transaction so the write lock is never held for long; returns how many."""
        return delete_expired_entries(self.store, now, batch_size=batch_size)


def delete_expired_entries(store: Store, now: datetime, *, batch_size: int = GC_BATCH) -> int:
    """Delete every entry expired at ``now`` in transactions of at most ``batch_size``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    total = 0
    while True:
        with store.write() as conn:
            deleted = memory_repo.delete_expired(conn, now, batch_size)
        total += deleted
        if deleted < batch_size:
            return total
