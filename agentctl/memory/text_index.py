"""Text search: SQLite FTS5 with BM25 ranking over each entry's searchable text.

The index is ``memory_search_fts``, an external-content FTS5 table over
``memory_entries.text`` kept in step by triggers (migration ``0003_memory_search``). A
query is tokenized like the index (``unicode61``) and becomes an OR of quoted terms, so
user input never reaches the FTS5 query grammar and an entry matching more (and rarer)
terms ranks higher. The score is ``-bm25`` (higher is better; SQLite computes it in
double precision, the same on every machine), ties broken by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.memory.embedders import tokenize
from agentctl.store import memory_search_repo

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["MAX_QUERY_TERMS", "RankedId", "match_expression", "text_search"]

#: Distinct query terms used; a 64 KiB query would otherwise make an enormous OR.
MAX_QUERY_TERMS = 256


@dataclass(frozen=True, slots=True)
class RankedId:
    entry_id: int
    key: str
    score: float


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH string: distinct query tokens, quoted, joined by OR (None: no words)."""
    terms = list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def text_search(
    conn: SqlRunner,
    namespace: str,
    query: str,
    now: datetime,
    filters: Mapping[str, Any],
    limit: int,
) -> list[RankedId]:
    """The best ``limit`` live entries for ``query``, score desc then key."""
    expression = match_expression(query)
    if expression is None:
        return []
    matches = memory_search_repo.text_matches(conn, namespace, expression, now, filters, limit)
    return [RankedId(entry_id, key, score) for entry_id, key, score in matches]
