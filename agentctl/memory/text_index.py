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
from typing import Any

from agentctl.memory.embedders import tokenize
from agentctl.memory.sql import live_entry_sql
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
    where, params = live_entry_sql("e", namespace, now, filters)
    rows = conn.exec_driver_sql(
        "SELECT e.id, e.key, -bm25(memory_search_fts) AS score "
        "FROM memory_search_fts JOIN memory_entries AS e ON e.id = memory_search_fts.rowid "
        f"WHERE memory_search_fts MATCH ? AND {where} "
        "ORDER BY score DESC, e.key ASC LIMIT ?",
        (expression, *params, limit),
    )
    return [RankedId(int(row[0]), str(row[1]), float(row[2])) for row in rows]
