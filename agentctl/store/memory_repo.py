"""Long-term memory rows: entries, their text index upkeep and the namespace generations
(searching them: store/memory_search_repo.py).

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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import memory_sealing
from agentctl.store.records import check_format_version
from agentctl.store.sealing import seal_binary, unseal
from agentctl.store.statements import Statement, columns, id_list, id_values, padded, statement
from agentctl.store.timestamps import from_db, to_db

if TYPE_CHECKING:
    from sqlalchemy import FromClause
    from sqlalchemy.sql.elements import ColumnElement
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "EntryRow",
    "EntryText",
    "EntryValues",
    "count_expired",
    "delete_entry",
    "delete_expired",
    "embedding_counts",
    "entries_by_id",
    "entry",
    "entry_exists",
    "entry_texts",
    "rebuild_text_index",
    "set_embeddings",
    "upsert_entries",
]

#: Ids per ``IN (...)`` list: a power of two (statements.padded), below SQLite's default
#: limit of 32,766 bound parameters.
ID_CHUNK = 8_192


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
    "id",
    "format_version",
    "namespace",
    "key",
    "value_type",
    "value_json",
    "text",
    "metadata_json",
    "embedding_model",
    "provenance_json",
    "created_at",
    "updated_at",
    "expires_at",
    "text_sealed",
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


@statement
def _upsert(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.memory_tables import memory_entries

    insert = (
        sql.insert(memory_entries).values(**{name: bindparam(name) for name in _WRITTEN}).inline()
    )
    return insert.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=["namespace", "key"],
        set_={name: insert.excluded[name] for name in _WRITTEN if name not in _KEPT_ON_CONFLICT},
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
) -> dict[str, Any]:
    stamp = to_db(now)
    return {
        "format_version": values.format_version,
        "namespace": values.namespace,
        "key": values.key,
        "value_type": values.value_type,
        "value_json": stored.value_json,
        "text": stored.text,
        "metadata_json": values.metadata_json,
        "embedding": stored.embedding,
        "embedding_model": values.embedding_model,
        "provenance_json": stored.provenance_json,
        "created_at": stamp,
        "updated_at": stamp,
        "expires_at": to_db(values.expires_at),
        "text_sealed": stored.text_sealed,
    }


# -- writing ------------------------------------------------------------------------------


def entry_exists(conn: SqlRunner, namespace: str, key: str) -> bool:
    return _entry_exists.run(conn, namespace=namespace, key=key).first() is not None


def _by_key(entries: FromClause) -> list[ColumnElement[bool]]:
    from sqlalchemy import bindparam

    return [entries.c.namespace == bindparam("namespace"), entries.c.key == bindparam("key")]


@statement
def _entry_exists(_: SqlDialect) -> Executable:
    from sqlalchemy import literal_column, select

    from agentctl.store.memory_tables import memory_entries

    return select(literal_column("1")).select_from(memory_entries).where(*_by_key(memory_entries))


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
    if len(rows) == 1:
        _upsert.run(conn, **rows[0])
    else:
        _upsert.run_many(conn, rows)


def delete_entry(conn: SqlRunner, namespace: str, key: str) -> bool:
    """Remove an entry; True when one was there."""
    return bool(_delete_entry.run(conn, namespace=namespace, key=key).rowcount)


@statement
def _delete_entry(_: SqlDialect) -> Executable:
    from sqlalchemy import delete

    from agentctl.store.memory_tables import memory_entries

    return delete(memory_entries).where(*_by_key(memory_entries))


def count_expired(conn: SqlRunner, now: datetime) -> int:
    row = _count_expired.run(conn, now=to_db(now)).first()
    return 0 if row is None else int(row[0])


@statement
def _count_expired(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.memory_tables import memory_entries

    return (
        select(func.count())
        .select_from(memory_entries)
        .where(memory_entries.c.expires_at <= bindparam("now"))
    )


def delete_expired(conn: SqlRunner, now: datetime, limit: int) -> int:
    """Delete up to ``limit`` entries whose expiry is at or before ``now``; how many went."""
    return int(_delete_expired.run(conn, now=to_db(now), limit=limit).rowcount)


@statement
def _delete_expired(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete, select

    from agentctl.store.memory_tables import memory_entries

    c = memory_entries.c
    expired = select(c.id).where(c.expires_at <= bindparam("now")).limit(bindparam("limit"))
    return delete(memory_entries).where(c.id.in_(expired))


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
    rows = _entry_texts.run(conn, namespace=namespace)
    return [
        EntryText(
            int(row[0]),
            str(row[1]),
            memory_sealing.open_text(conn, namespace, str(row[1]), row[2], row[3]),
            row[2],
        )
        for row in rows
    ]


@statement
def _entry_texts(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.memory_tables import memory_entries

    c = memory_entries.c
    return (
        select(c.id, c.key, c.text, c.text_sealed)
        .where(c.namespace == bindparam("namespace"))
        .order_by(c.id)
    )


def set_embeddings(
    conn: SqlRunner,
    namespace: str,
    updates: Iterable[tuple[EntryText, bytes]],
    identity: str,
) -> None:
    """Store each entry's new embedding; a row whose text changed since it was read is
    left alone (it holds a newer embedding already)."""
    _set_embedding.run_many(
        conn,
        (
            {
                "embedding": seal_binary(
                    conn,
                    memory_sealing.TABLE,
                    "embedding",
                    memory_sealing.record(namespace, item.key),
                    blob,
                ),
                "identity": identity,
                "id": item.id,
                "stored": item.stored,
            }
            for item, blob in updates
        ),
    )


@statement
def _set_embedding(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.memory_tables import memory_entries

    c = memory_entries.c
    return (
        update(memory_entries)
        .where(c.id == bindparam("id"), c.text == bindparam("stored"))
        .values(embedding=bindparam("embedding"), embedding_model=bindparam("identity"))
    )


def rebuild_text_index(conn: SqlRunner) -> None:
    _rebuild_text_index.run(conn)


@statement
def _rebuild_text_index(sql: SqlDialect) -> Executable:
    return sql.rebuild_memory_text_index()


# -- reading ------------------------------------------------------------------------------


def entry(conn: SqlRunner, namespace: str, key: str) -> EntryRow | None:
    row = _entry_by_key.run(conn, namespace=namespace, key=key).first()
    return None if row is None else _entry(conn, row)


@statement
def _entry_by_key(_: SqlDialect) -> Executable:
    from sqlalchemy import select

    from agentctl.store.memory_tables import memory_entries

    return select(*columns(memory_entries, _ENTRY_COLUMNS)).where(*_by_key(memory_entries))


def entries_by_id(conn: SqlRunner, ids: Sequence[int]) -> dict[int, EntryRow]:
    found: dict[int, EntryRow] = {}
    for start in range(0, len(ids), ID_CHUNK):
        listed = id_values(padded(ids[start : start + ID_CHUNK]))
        for row in _entries_by_id(len(listed)).run(conn, **listed):
            item = _entry(conn, row)
            found[item.id] = item
    return found


@lru_cache(maxsize=16)
def _entries_by_id(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import select

        from agentctl.store.memory_tables import memory_entries

        return select(*columns(memory_entries, _ENTRY_COLUMNS)).where(
            id_list(memory_entries.c.id, count)
        )

    return Statement(build, f"entries_by_id({count})")


def embedding_counts(conn: SqlRunner, namespace: str) -> dict[str, int]:
    """How many entries of ``namespace`` each embedding space holds."""
    rows = _embedding_counts.run(conn, namespace=namespace)
    return {str(row[0]): int(row[1]) for row in rows}


@statement
def _embedding_counts(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.memory_tables import memory_entries

    c = memory_entries.c
    return (
        select(c.embedding_model, func.count())
        .where(c.namespace == bindparam("namespace"), c.embedding_model.is_not(None))
        .group_by(c.embedding_model)
    )
