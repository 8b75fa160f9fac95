"""Long-term memory rows: entries, their FTS5 text index and the namespace generations.

Every function runs inside the caller's transaction (``Store.write()`` / ``Store.read()``).
Times are stored with :mod:`agentctl.store.timestamps`, so ``expires_at <= ?`` compares
instants. Triggers (migration ``0003_memory_search``) keep ``memory_search_fts`` and
``memory_search_generations`` in step with every insert, update and delete of an entry,
inside the same transaction.

Metadata filters are exact matches on canonical JSON: ``metadata_json`` is stored
canonically, SQLite's ``->`` operator returns the stored JSON text of one member, and the
filter value is serialized the same way. So ``"a"`` matches only the string ``"a"``,
``1`` does not match ``1.0`` or ``true``, ``null`` matches an explicit null but not a
missing key, and objects match when they are equal as JSON. PostgreSQL's ``->`` on the
``json`` type keeps a member's text as stored, so the same comparison holds there.

On PostgreSQL the text index is PostgreSQL full-text search (``to_tsvector('simple', …)``
under a GIN index, migration ``0003_memory_search``) ranked by ``ts_rank_cd``: the same
entries match, but scores and the order of entries with different scores are PostgreSQL's,
not BM25's.

With encryption on, an entry's value, provenance, searchable text and embedding are
sealed, and the text index sees keyed tokens of the words instead of the words
(store/memory_sealing.py); metadata stays clear so filters remain SQL comparisons.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.digest import canonical_json
from agentctl.store import memory_sealing
from agentctl.store.dialect import is_postgres
from agentctl.store.records import check_format_version
from agentctl.store.sealing import seal_binary, unseal
from agentctl.store.timestamps import from_db, to_db

if TYPE_CHECKING:
    from agentctl.store.runner import SqlRunner

__all__ = [
    "EntryRow",
    "EntryText",
    "EntryValues",
    "count_expired",
    "delete_entry",
    "delete_expired",
    "embedding_counts",
    "embeddings",
    "entries_by_id",
    "entry",
    "entry_exists",
    "entry_texts",
    "expired_ids",
    "ids_matching",
    "namespace_generation",
    "rebuild_text_index",
    "set_embeddings",
    "text_matches",
    "upsert_entries",
]

#: Ids per ``IN (...)`` list: below SQLite's default limit of 32,766 bound parameters.
ID_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class EntryValues:
    """What a write stores; ``created_at`` is kept when the entry already exists."""

    namespace: str
    key: str
    value_type: str
    value_json: str
    text: str
    metadata_json: str
    embedding: bytes
    embedding_model: str
    provenance_json: str | None
    expires_at: datetime | None
    format_version: int = 1


@dataclass(frozen=True, slots=True)
class EntryRow:
    """One stored entry (its embedding stays in the table: searches read it in bulk).
    ``text`` is None when it is sealed (:func:`entry_texts` opens it)."""

    id: int
    namespace: str
    key: str
    value_type: str
    value_json: str
    text: str | None
    metadata_json: str
    embedding_model: str | None
    provenance_json: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


_ENTRY_COLUMNS = (
    "id, format_version, namespace, key, value_type, value_json, text, metadata_json, "
    "embedding_model, provenance_json, created_at, updated_at, expires_at, text_sealed"
)

_WRITTEN = (
    "format_version",
    "namespace",
    "key",
    "value_type",
    "value_json",
    "text",
    "metadata_json",
    "embedding",
    "embedding_model",
    "provenance_json",
    "created_at",
    "updated_at",
    "expires_at",
    "text_sealed",
)
_KEPT_ON_CONFLICT = ("namespace", "key", "created_at")
_UPSERT = (
    f"INSERT INTO memory_entries ({', '.join(_WRITTEN)}) "
    f"VALUES ({', '.join('?' * len(_WRITTEN))}) "
    "ON CONFLICT (namespace, key) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in _WRITTEN if name not in _KEPT_ON_CONFLICT)
)


def _entry(conn: SqlRunner, row: Sequence[Any]) -> EntryRow:
    check_format_version("memory entry", f"{row[2]}/{row[3]}", int(row[1]))
    namespace, key = str(row[2]), str(row[3])
    name = memory_sealing.record(namespace, key)
    table = memory_sealing.TABLE
    return EntryRow(
        id=int(row[0]),
        namespace=namespace,
        key=key,
        value_type=str(row[4]),
        value_json=str(unseal(conn, table, "value_json", name, row[5])),
        # Sealed, the searchable text is not opened here: a search reads ten rows per
        # query and nothing reads their text (entry_texts does, for re-embedding).
        text=None if row[13] is not None else row[6],
        metadata_json=str(row[7]),
        embedding_model=row[8],
        provenance_json=unseal(conn, table, "provenance_json", name, row[9]),
        created_at=from_db(row[10]),
        updated_at=from_db(row[11]),
        expires_at=from_db(row[12]),
    )


def _parameters(
    values: EntryValues, stored: memory_sealing.SealedEntry, now: datetime
) -> tuple[Any, ...]:
    stamp = to_db(now)
    return (
        values.format_version,
        values.namespace,
        values.key,
        values.value_type,
        stored.value_json,
        stored.text,
        values.metadata_json,
        stored.embedding,
        values.embedding_model,
        stored.provenance_json,
        stamp,
        stamp,
        to_db(values.expires_at),
        stored.text_sealed,
    )


def _live_entry_sql(
    alias: str, namespace: str, now: datetime, filters: Mapping[str, Any], postgres: bool
) -> tuple[str, list[Any]]:
    """``WHERE`` conditions for unexpired entries of ``namespace`` matching ``filters``."""
    # `+` keeps SQLite off the (namespace, key) index: these conditions filter rows that
    # an FTS match or an id list already selected; walking a whole namespace is slower.
    clauses = [
        f"+{alias}.namespace = ?",
        f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)",
    ]
    params: list[Any] = [namespace, to_db(now)]
    for key in sorted(filters):
        if postgres:
            clauses.append(f"(CAST({alias}.metadata_json AS json) -> ?)::text = ?")
            params.extend([key, canonical_json(filters[key])])
        else:
            clauses.append(f"({alias}.metadata_json -> ?) = ?")
            params.extend([f'$."{key}"', canonical_json(filters[key])])
    return " AND ".join(clauses), params


# -- writing ------------------------------------------------------------------------------


def entry_exists(conn: SqlRunner, namespace: str, key: str) -> bool:
    row = conn.exec_driver_sql(
        "SELECT 1 FROM memory_entries WHERE namespace = ? AND key = ?", (namespace, key)
    ).first()
    return row is not None


def upsert_entries(conn: SqlRunner, entries: Sequence[EntryValues], now: datetime) -> None:
    """Insert or replace entries by (namespace, key); an existing entry keeps its
    ``created_at`` and everything else is replaced. ``updated_at`` is ``now``."""
    if not entries:
        return
    stored = memory_sealing.seal_entries(
        conn,
        [
            memory_sealing.PlainEntry(
                v.namespace, v.key, v.value_json, v.provenance_json, v.text, v.embedding
            )
            for v in entries
        ],
    )
    rows = [
        _parameters(values, sealed, now) for values, sealed in zip(entries, stored, strict=True)
    ]
    conn.exec_driver_sql(_UPSERT, rows[0] if len(rows) == 1 else rows)


def delete_entry(conn: SqlRunner, namespace: str, key: str) -> bool:
    """Remove an entry; True when one was there."""
    result = conn.exec_driver_sql(
        "DELETE FROM memory_entries WHERE namespace = ? AND key = ?", (namespace, key)
    )
    return bool(result.rowcount)


def count_expired(conn: SqlRunner, now: datetime) -> int:
    row = conn.exec_driver_sql(
        "SELECT COUNT(*) FROM memory_entries WHERE expires_at <= ?", (to_db(now),)
    ).first()
    return 0 if row is None else int(row[0])


def delete_expired(conn: SqlRunner, now: datetime, limit: int) -> int:
    """Delete up to ``limit`` entries whose expiry is at or before ``now``; how many went."""
    result = conn.exec_driver_sql(
        "DELETE FROM memory_entries WHERE id IN "
        "(SELECT id FROM memory_entries WHERE expires_at <= ? LIMIT ?)",
        (to_db(now), limit),
    )
    return int(result.rowcount)


@dataclass(frozen=True, slots=True)
class EntryText:
    """An entry's searchable text (``text``) and the ``text`` column as stored
    (``stored``: the same text, or its search tokens when sealed)."""

    id: int
    key: str
    text: str | None
    stored: str | None


def entry_texts(conn: SqlRunner, namespace: str) -> list[EntryText]:
    """The searchable text of every entry of ``namespace``, by id."""
    rows = conn.exec_driver_sql(
        "SELECT id, key, text, text_sealed FROM memory_entries WHERE namespace = ? ORDER BY id",
        (namespace,),
    )
    return [
        EntryText(
            int(row[0]),
            str(row[1]),
            memory_sealing.open_text(conn, namespace, str(row[1]), row[2], row[3]),
            row[2],
        )
        for row in rows
    ]


def set_embeddings(
    conn: SqlRunner,
    namespace: str,
    updates: Iterable[tuple[EntryText, bytes]],
    identity: str,
) -> None:
    """Store each entry's new embedding; a row whose text changed since it was read is
    left alone (it holds a newer embedding already)."""
    rows = [
        (
            seal_binary(
                conn,
                memory_sealing.TABLE,
                "embedding",
                memory_sealing.record(namespace, item.key),
                blob,
            ),
            identity,
            item.id,
            item.stored,
        )
        for item, blob in updates
    ]
    if rows:
        conn.exec_driver_sql(
            "UPDATE memory_entries SET embedding = ?, embedding_model = ? "
            "WHERE id = ? AND text = ?",
            rows[0] if len(rows) == 1 else rows,
        )


def rebuild_text_index(conn: SqlRunner) -> None:
    if is_postgres(conn):
        conn.exec_driver_sql("REINDEX INDEX memory_search_text")
        return
    conn.exec_driver_sql("INSERT INTO memory_search_fts (memory_search_fts) VALUES ('rebuild')")


# -- reading ------------------------------------------------------------------------------


def entry(conn: SqlRunner, namespace: str, key: str) -> EntryRow | None:
    row = conn.exec_driver_sql(
        f"SELECT {_ENTRY_COLUMNS} FROM memory_entries "  # noqa: S608 - fixed identifiers
        "WHERE namespace = ? AND key = ?",
        (namespace, key),
    ).first()
    return None if row is None else _entry(conn, row)


def entries_by_id(conn: SqlRunner, ids: Sequence[int]) -> dict[int, EntryRow]:
    found: dict[int, EntryRow] = {}
    for start in range(0, len(ids), ID_CHUNK):
        chunk = list(ids[start : start + ID_CHUNK])
        marks = ", ".join("?" * len(chunk))
        for row in conn.exec_driver_sql(
            f"SELECT {_ENTRY_COLUMNS} FROM memory_entries WHERE id IN ({marks})",  # noqa: S608
            tuple(chunk),
        ):
            item = _entry(conn, row)
            found[item.id] = item
    return found


def embedding_counts(conn: SqlRunner, namespace: str) -> dict[str, int]:
    """How many entries of ``namespace`` each embedding space holds."""
    rows = conn.exec_driver_sql(
        "SELECT embedding_model, COUNT(*) FROM memory_entries "
        "WHERE namespace = ? AND embedding_model IS NOT NULL GROUP BY embedding_model",
        (namespace,),
    )
    return {str(row[0]): int(row[1]) for row in rows}


# -- searching ----------------------------------------------------------------------------


def text_matches(
    conn: SqlRunner,
    namespace: str,
    expression: str,
    now: datetime,
    filters: Mapping[str, Any],
    limit: int,
) -> list[tuple[int, str, float]]:
    """``(id, key, -bm25)`` of the best ``limit`` live entries for an FTS5 MATCH
    ``expression``, score desc then key."""
    postgres = is_postgres(conn)
    where, params = _live_entry_sql("e", namespace, now, filters, postgres)
    terms = re.findall(r'"([^"]+)"', expression)
    phrases = memory_sealing.query_phrases(conn, namespace, terms)
    if postgres:
        return _postgres_text_matches(conn, terms, phrases, where, params, limit)
    if phrases:
        # Sealed entries match the tokens of the words; clear ones (written before
        # `enable`, or by a process that opened the store before it) the words.
        expression = " OR ".join([expression, *('"' + " ".join(p) + '"' for p in phrases)])
    rows = conn.exec_driver_sql(
        "SELECT e.id, e.key, -bm25(memory_search_fts) AS score "
        "FROM memory_search_fts JOIN memory_entries AS e ON e.id = memory_search_fts.rowid "
        f"WHERE memory_search_fts MATCH ? AND {where} "
        "ORDER BY score DESC, e.key ASC LIMIT ?",
        (expression, *params, limit),
    )
    return [(int(row[0]), str(row[1]), float(row[2])) for row in rows]


def _postgres_text_matches(
    conn: SqlRunner,
    terms: list[str],
    phrases: list[list[str]],
    where: str,
    params: list[Any],
    limit: int,
) -> list[tuple[int, str, float]]:
    """The FTS5 expression's quoted terms (word characters only) as an OR ``tsquery``;
    a sealed index's token phrases join it with ``<->`` (followed by)."""
    if not terms:
        return []
    alternatives = ["'" + term.replace("'", "''") + "'" for term in terms]
    alternatives.extend("(" + " <-> ".join(phrase) + ")" for phrase in phrases)
    query = " | ".join(alternatives)
    document = "to_tsvector('simple', COALESCE(e.text, ''))"
    rows = conn.exec_driver_sql(
        f"SELECT e.id, e.key, ts_rank_cd({document}, q.query) AS score "  # noqa: S608
        "FROM memory_entries AS e, (SELECT to_tsquery('simple', ?) AS query) AS q "
        f"WHERE {document} @@ q.query AND {where} "
        "ORDER BY score DESC, e.key ASC LIMIT ?",
        (query, *params, limit),
    )
    return [(int(row[0]), str(row[1]), float(row[2])) for row in rows]


def namespace_generation(conn: SqlRunner, namespace: str) -> int:
    """A counter the triggers bump on every change to ``namespace``'s entries."""
    row = conn.exec_driver_sql(
        "SELECT generation FROM memory_search_generations WHERE namespace = ?", (namespace,)
    ).first()
    return 0 if row is None else int(row[0])


def embeddings(conn: SqlRunner, namespace: str, identity: str) -> list[tuple[int, str, bytes]]:
    """``(id, key, embedding)`` of every entry of ``namespace`` in embedding space
    ``identity`` (expired or not: expiry is applied per query)."""
    rows = conn.exec_driver_sql(
        "SELECT id, key, embedding FROM memory_entries "
        "WHERE namespace = ? AND embedding_model = ? AND embedding IS NOT NULL",
        (namespace, identity),
    )
    return memory_sealing.open_embeddings(
        conn, namespace, [(int(row[0]), str(row[1]), row[2]) for row in rows]
    )


def expired_ids(conn: SqlRunner, namespace: str, now: datetime) -> list[int]:
    # `+namespace` keeps SQLite on the expires_at index: few entries are expired, while
    # the namespace index would walk every entry of the namespace.
    rows = conn.exec_driver_sql(
        "SELECT id FROM memory_entries WHERE expires_at <= ? AND +namespace = ?",
        (to_db(now), namespace),
    )
    return [int(row[0]) for row in rows]


def ids_matching(
    conn: SqlRunner,
    namespace: str,
    now: datetime,
    filters: Mapping[str, Any],
    ids: Sequence[int],
) -> list[int]:
    """The ``ids`` that are live entries of ``namespace`` whose metadata matches."""
    where, params = _live_entry_sql("e", namespace, now, filters, is_postgres(conn))
    allowed: list[int] = []
    for start in range(0, len(ids), ID_CHUNK):
        chunk = list(ids[start : start + ID_CHUNK])
        marks = ", ".join("?" * len(chunk))
        allowed.extend(
            int(row[0])
            for row in conn.exec_driver_sql(
                f"SELECT e.id FROM memory_entries AS e WHERE e.id IN ({marks}) AND {where}",  # noqa: S608
                (*chunk, *params),
            )
        )
    return allowed
