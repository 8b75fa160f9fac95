"""Vector search: exact cosine similarity over a namespace's embedding matrix.

Brute force on purpose: with unit vectors a search is one matrix-vector product, exact
(no approximate-index recall to tune or explain), and 100,000 x 64 float32 components are
25 MB that NumPy scans in a few milliseconds. Reading 100,000 blobs out of SQLite costs far
more than the arithmetic, so each ``VectorIndex`` keeps the matrix of a (namespace,
embedding space) in memory and reloads it only when the namespace's generation counter
(bumped by triggers on every insert, update and delete) has moved. Expiry and metadata
filters are applied per query as masks, so they never stale the cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from agentctl.memory.embedders import Vectors
from agentctl.memory.text_index import RankedId
from agentctl.store import memory_search_repo

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["VectorIndex"]


@dataclass(frozen=True, slots=True)
class _Matrix:
    generation: int
    ids: npt.NDArray[np.int64]
    keys: tuple[str, ...]
    vectors: Vectors


class VectorIndex:
    """In-memory embedding matrices, one per (namespace, embedding identity)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], _Matrix] = {}

    def _matrix(self, conn: SqlRunner, namespace: str, identity: str, dims: int) -> _Matrix:
        generation = memory_search_repo.namespace_generation(conn, namespace)
        cached = self._cache.get((namespace, identity))
        if cached is not None and cached.generation == generation:
            return cached
        rows = memory_search_repo.embeddings(conn, namespace, identity)
        if rows:
            ids, keys, blobs = zip(*rows, strict=True)
            vectors = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(rows), dims)
        else:
            ids, keys = (), ()
            vectors = np.zeros((0, dims), dtype=np.float32)
        matrix = _Matrix(generation, np.array(ids, dtype=np.int64), tuple(keys), vectors)
        self._cache[(namespace, identity)] = matrix
        return matrix

    def search(
        self,
        conn: SqlRunner,
        namespace: str,
        identity: str,
        query_vector: Vectors,
        now: datetime,
        filters: Mapping[str, Any],
        limit: int,
    ) -> list[RankedId]:
        """The ``limit`` live entries most similar to ``query_vector``, score desc then key.

        Scores are cosines rounded to 6 decimals. Metadata filters are checked in SQL on
        the best-scoring candidates only, widening the window until ``limit`` entries pass
        or every entry was considered, so a filter never costs a scan of every entry's
        JSON. A window holds every entry scoring at least its threshold minus 1e-6, so
        entries that round to the same score as the last one kept are all compared by key.
        """
        if not np.any(query_vector):
            return []
        dims = int(query_vector.shape[0])
        matrix = self._matrix(conn, namespace, identity, dims)
        if not len(matrix.ids):
            return []
        raw = (matrix.vectors @ query_vector).astype(np.float64)
        expired = self._expired(conn, namespace, now, matrix.ids)
        if expired is not None:
            raw[expired] = -np.inf
        live = int(np.count_nonzero(raw > -np.inf))
        window = min(live, limit * 8)
        while True:
            if window >= live:
                threshold = -np.inf
                candidates = np.flatnonzero(raw > -np.inf)
            else:
                threshold = float(np.partition(raw, len(raw) - window)[len(raw) - window])
                candidates = np.flatnonzero(raw >= threshold - 1e-6)
            passing = self._passing(conn, namespace, now, filters, matrix.ids, candidates)
            core = int(np.count_nonzero(raw[passing] >= threshold))
            if core >= limit or window >= live:
                break
            window = min(live, window * 4)
        scores = np.round(raw[passing], 6)
        ordered = sorted(range(len(passing)), key=lambda i: (-scores[i], matrix.keys[passing[i]]))
        return [
            RankedId(int(matrix.ids[passing[i]]), matrix.keys[passing[i]], float(scores[i]))
            for i in ordered[:limit]
        ]

    @staticmethod
    def _expired(
        conn: SqlRunner, namespace: str, now: datetime, ids: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_] | None:
        expired = memory_search_repo.expired_ids(conn, namespace, now)
        if not expired:
            return None
        return np.isin(ids, np.array(expired, dtype=np.int64))

    @staticmethod
    def _passing(
        conn: SqlRunner,
        namespace: str,
        now: datetime,
        filters: Mapping[str, Any],
        ids: npt.NDArray[np.int64],
        candidates: npt.NDArray[np.intp],
    ) -> npt.NDArray[np.intp]:
        """The candidates (positions in ``ids``) whose metadata matches ``filters``."""
        if not filters or not len(candidates):
            return candidates
        wanted = [int(i) for i in ids[candidates]]
        allowed = memory_search_repo.ids_matching(conn, namespace, now, filters, wanted)
        keep = np.isin(ids[candidates], np.array(allowed, dtype=np.int64))
        return candidates[keep]
