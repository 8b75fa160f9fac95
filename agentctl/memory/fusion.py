"""Hybrid ranking: reciprocal rank fusion (RRF) of the text and vector rankings.

``score(d) = sum over rankings r containing d of 1 / (K + rank_r(d))`` with ``K = 60``
and ranks from 1 (Cormack, Clarke and Büttcher, SIGIR 2009). Why RRF rather than a
weighted sum of normalised scores: BM25 scores are unbounded and depend on the corpus and
the query length, cosines live in [-1, 1]; any min-max or z-score normalisation makes one
outlier reshape every other score and needs a weight tuned per corpus. RRF uses ranks
only, has one constant whose published default works across collections, and an entry
found by both rankings beats one found by a single ranking at a similar rank. Each input
ranking holds at most 100 entries (the search limit's maximum).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentctl.memory.text_index import RankedId

__all__ = ["RRF_K", "reciprocal_rank_fusion"]

RRF_K = 60


def reciprocal_rank_fusion(rankings: Sequence[Sequence[RankedId]]) -> list[RankedId]:
    """Fuse rankings; scores rounded to 6 decimals, ordered score desc then key."""
    scores: dict[int, float] = {}
    keys: dict[int, str] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item.entry_id] = scores.get(item.entry_id, 0.0) + 1.0 / (RRF_K + rank)
            keys[item.entry_id] = item.key
    fused = [
        RankedId(entry_id, keys[entry_id], round(score, 6)) for entry_id, score in scores.items()
    ]
    fused.sort(key=lambda item: (-item.score, item.key))
    return fused
