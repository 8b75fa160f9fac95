"""Searching long-term memory: the text index, the embeddings and the live-entry filters
that both searches apply (store/memory_repo.py holds the entries themselves).

Metadata filters are exact matches on canonical JSON (the rule is spelled out in
store/memory_repo.py's docstring). Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.digest import canonical_json
from agentctl.store import memory_sealing
from agentctl.store.dialect import sql_dialect
from agentctl.store.memory_repo import ID_CHUNK
from agentctl.store.statements import Statement, id_list, id_values, padded, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy import FromClause
    from sqlalchemy.sql.elements import ColumnElement
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "embeddings",
    "expired_ids",
    "ids_matching",
    "namespace_generation",
    "text_matches",
]


def _live_entry(sql: SqlDialect, entries: FromClause, filters: int) -> list[ColumnElement[bool]]:
    """Conditions for unexpired entries of the ``namespace`` parameter whose metadata
    matches ``filters`` members (parameters ``member_N`` and ``value_N``, given by
    :func:`_live_values`)."""
    from sqlalchemy import bindparam, or_

    c = entries.c
    # Unindexed: these conditions filter rows that a text match or an id list already
    # selected; SQLite walking a whole namespace by its (namespace, key) index is slower.
    found = [
        sql.unindexed(c.namespace) == bindparam("namespace"),
        or_(c.expires_at.is_(None), c.expires_at > bindparam("now")),
    ]
    found.extend(
        sql.json_member(c.metadata_json, bindparam(f"member_{n}")) == bindparam(f"value_{n}")
        for n in range(filters)
    )
    return found


def _live_values(
    conn: SqlRunner, namespace: str, now: datetime, filters: Mapping[str, Any]
) -> dict[str, Any]:
    """The parameters of :func:`_live_entry`'s conditions."""
    sql = sql_dialect(conn.dialect.name)
    values: dict[str, Any] = {"namespace": namespace, "now": to_db(now)}
    for n, key in enumerate(sorted(filters)):
        values[f"member_{n}"] = sql.json_member_name(key)
        values[f"value_{n}"] = canonical_json(filters[key])
    return values


def text_matches(
    conn: SqlRunner,
    namespace: str,
    expression: str,
    now: datetime,
    filters: Mapping[str, Any],
    limit: int,
) -> list[tuple[int, str, float]]:
    """``(id, key, score)`` of the best ``limit`` live entries for an FTS5 MATCH
    ``expression`` (the score: ``-bm25`` on SQLite), score desc then key."""
    terms = re.findall(r'"([^"]+)"', expression)
    phrases = memory_sealing.query_phrases(conn, namespace, terms)
    query = sql_dialect(conn.dialect.name).memory_text_query(expression, terms, phrases)
    if query is None:
        return []
    rows = _text_matches(len(filters)).run(
        conn, query=query, limit=limit, **_live_values(conn, namespace, now, filters)
    )
    return [(int(row[0]), str(row[1]), float(row[2])) for row in rows]


@lru_cache(maxsize=16)
def _text_matches(filters: int) -> Statement:
    def build(sql: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.memory_tables import memory_entries

        e = memory_entries.alias("e")
        source, matches, score = sql.memory_text_search(e, bindparam("query"))
        scored = score.label("score")
        return (
            select(e.c.id, e.c.key, scored)
            .select_from(source)
            .where(matches, *_live_entry(sql, e, filters))
            .order_by(scored.desc(), e.c.key.asc())
            .limit(bindparam("limit"))
        )

    return Statement(build, f"text_matches({filters})")


def namespace_generation(conn: SqlRunner, namespace: str) -> int:
    """A counter the triggers bump on every change to ``namespace``'s entries."""
    row = _namespace_generation.run(conn, namespace=namespace).first()
    return 0 if row is None else int(row[0])


@statement
def _namespace_generation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, column, select, table

    # Kept by the triggers of migration 0003, outside the schema's metadata.
    generations = table("memory_search_generations", column("namespace"), column("generation"))
    return select(generations.c.generation).where(generations.c.namespace == bindparam("namespace"))


def embeddings(conn: SqlRunner, namespace: str, identity: str) -> list[tuple[int, str, bytes]]:
    """``(id, key, embedding)`` of every entry of ``namespace`` in embedding space
    ``identity`` (expired or not: expiry is applied per query)."""
    rows = _embeddings.run(conn, namespace=namespace, identity=identity)
    return memory_sealing.open_embeddings(
        conn, namespace, [(int(row[0]), str(row[1]), row[2]) for row in rows]
    )


@statement
def _embeddings(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.memory_tables import memory_entries

    c = memory_entries.c
    return select(c.id, c.key, c.embedding).where(
        c.namespace == bindparam("namespace"),
        c.embedding_model == bindparam("identity"),
        c.embedding.is_not(None),
    )


def expired_ids(conn: SqlRunner, namespace: str, now: datetime) -> list[int]:
    return [int(row[0]) for row in _expired_ids.run(conn, now=to_db(now), namespace=namespace)]


@statement
def _expired_ids(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.memory_tables import memory_entries

    c = memory_entries.c
    # Unindexed namespace: SQLite stays on the expires_at index, where few entries are
    # expired, while the namespace index would walk every entry of the namespace.
    return select(c.id).where(
        c.expires_at <= bindparam("now"), sql.unindexed(c.namespace) == bindparam("namespace")
    )


def ids_matching(
    conn: SqlRunner,
    namespace: str,
    now: datetime,
    filters: Mapping[str, Any],
    ids: Sequence[int],
) -> list[int]:
    """The ``ids`` that are live entries of ``namespace`` whose metadata matches."""
    live = _live_values(conn, namespace, now, filters)
    allowed: list[int] = []
    for start in range(0, len(ids), ID_CHUNK):
        listed = id_values(padded(ids[start : start + ID_CHUNK]))
        rows = _ids_matching(len(listed), len(filters)).run(conn, **listed, **live)
        allowed.extend(int(row[0]) for row in rows)
    return allowed


@lru_cache(maxsize=32)
def _ids_matching(count: int, filters: int) -> Statement:
    def build(sql: SqlDialect) -> Executable:
        from sqlalchemy import select

        from agentctl.store.memory_tables import memory_entries

        e = memory_entries.alias("e")
        return select(e.c.id).where(id_list(e.c.id, count), *_live_entry(sql, e, filters))

    return Statement(build, f"ids_matching({count}, {filters})")
