"""Long-term memory sealed at rest, with its text search still working (docs/encryption.md).

A memory entry is named by (namespace, key), which stay readable like every other record
name. With encryption on, its payloads are stored as follows:

- ``value_json`` and ``provenance_json`` are sealed like any payload column
  (``aes256gcm:KEY_ID:…``, bytes on SQLite), the associated data naming the entry;
- ``embedding`` is sealed as bytes (``aes256gcm:KEY_ID:`` then nonce ‖ ciphertext ‖ tag)
  and opened when a namespace's embedding matrix is loaded for vector search;
- ``text_sealed`` holds the searchable text sealed, and ``text`` — the column the text
  index (FTS5, PostgreSQL ``tsvector``) reads — holds one **search token** per word of the
  text, in the text's order: ``m`` and the hex of the first 80 bits of
  HMAC-SHA256(search key, word). The search key is derived from the encryption key with
  HKDF (:meth:`Sealer.search_key`), one per key id. A token does not depend on the
  namespace: FTS5 computes BM25's word rarity over the whole index, and one token per
  word across namespaces keeps those counts, hence the scores, those of the clear words.

A word is what SQLite's ``unicode61 remove_diacritics 2`` tokenizer makes of the text
(:func:`words_of` runs that tokenizer on an in-memory table, on either store; ASCII text
is split by the same rule without it). A query's words become the same tokens, so the
index matches the same entries; one token per word keeps every word count, so BM25 scores
are the very numbers it computes over the clear words. A query also keeps its clear words,
so entries written before ``enable`` (still clear) are found during the walk.

The tokens are deterministic per (key, word): whoever reads the database can count how
often a token occurs and which entries (of any namespace) share it, and sees each text's
length in words (docs/encryption.md, "Long-term memory"). ``metadata_json`` stays clear:
metadata filters are exact comparisons made in SQL.
"""

from __future__ import annotations

import hmac
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.keyring import SEALED_BYTES_PREFIX, SEALED_PREFIX, Sealer
from agentctl.store.sealing import (
    open_value,
    reseal,
    reseal_binary,
    seal,
    seal_binary,
    sealed_head_of,
    sealed_under,
    sealer_of,
    unseal,
)
from agentctl.store.statements import Statement, columns, statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner, Store

__all__ = [
    "TABLE",
    "TOKENIZER",
    "PlainEntry",
    "SealedEntry",
    "column_counts",
    "index_words",
    "open_embeddings",
    "open_text",
    "query_phrases",
    "rebuild_index",
    "record",
    "seal_entries",
    "seal_memory",
    "search_tokens",
    "words_of",
]

TABLE = "memory_entries"
_TOKEN_BYTES = 10
_TOKEN_CACHE = 100_000


def record(namespace: str, key: str) -> tuple[str, str, str]:
    """What names an entry in its values' associated data: the namespace's length first,
    so ``a/b`` + ``c`` and ``a`` + ``b/c`` are different entries."""
    return (str(len(namespace)), namespace, key)


# -- words and tokens -----------------------------------------------------------------------


#: The text index's tokenizer (migration ``0003_memory_search``).
TOKENIZER = "unicode61 remove_diacritics 2"
_WORDS = threading.local()
_ASCII_WORD = re.compile(r"[a-z0-9]+")


def _word_index() -> sqlite3.Connection:
    """This thread's in-memory FTS5 table: the text index's own tokenizer, asked directly."""
    conn: sqlite3.Connection | None = getattr(_WORDS, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE w USING fts5(t, content='', tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(w, 'instance')")
        _WORDS.conn = conn
    return conn


def words_of(texts: Sequence[str]) -> list[list[str]]:
    """The words SQLite's FTS5 tokenizer finds in each text, in order and folded as the
    text index folds them. ASCII text is split where unicode61 splits it (every character
    but a letter or digit separates; letters fold to lower case); any other text is given
    to the tokenizer itself (on a scratch in-memory table whose rows are rolled back), so
    sealed and clear search see the very same words."""
    found: list[list[str]] = [[] for _ in texts]
    others = []
    for position, text in enumerate(texts):
        if text.isascii():
            found[position] = _ASCII_WORD.findall(text.lower())
        else:
            others.append((position + 1, text))
    if not others:
        return found
    conn = _word_index()
    conn.execute("BEGIN")
    try:
        conn.executemany("INSERT INTO w (rowid, t) VALUES (?, ?)", others)
        for doc, term in conn.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
            found[int(doc) - 1].append(str(term))
    finally:
        conn.execute("ROLLBACK")
    return found


def index_words(text: str) -> list[str]:
    """The words the text index sees in ``text`` (:func:`words_of`)."""
    return words_of([text])[0]


def search_tokens(sealer: Sealer, key_id: str, words: Sequence[str]) -> list[str]:
    """One token per word: ``m`` + hex(HMAC-SHA256(search key, word))[:80 bits]. Tokens
    are remembered per key (up to :data:`_TOKEN_CACHE` words): words repeat a lot."""
    cache = sealer.search_token_cache.setdefault(key_id, {})
    out = []
    key: bytes | None = None
    for word in words:
        token = cache.get(word)
        if token is None:
            if key is None:
                key = sealer.search_key(key_id)
            token = "m" + hmac.digest(key, word.encode(), "sha256")[:_TOKEN_BYTES].hex()
            if len(cache) < _TOKEN_CACHE:
                cache[word] = token
        out.append(token)
    return out


# -- writing and reading one entry -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SealedEntry:
    """The stored form of an entry's payload columns."""

    value_json: str | bytes
    provenance_json: str | bytes | None
    text: str | None
    text_sealed: str | bytes | None
    embedding: bytes | None


@dataclass(frozen=True, slots=True)
class PlainEntry:
    """An entry's payload columns in clear, as a write gives them."""

    namespace: str
    key: str
    value_json: str
    provenance_json: str | None
    text: str | None
    embedding: bytes | None


def seal_entries(conn: Any, entries: Sequence[PlainEntry]) -> list[SealedEntry]:
    """The entries as stored: unchanged with encryption off, sealed and tokenized with it
    on (the texts' words found in one pass)."""
    sealer = sealer_of(conn)
    if sealer.active is None:
        return [
            SealedEntry(e.value_json, e.provenance_json, e.text, None, e.embedding) for e in entries
        ]
    words = words_of([e.text or "" for e in entries])
    return [_sealed(sealer, e, w, conn) for e, w in zip(entries, words, strict=True)]


def _sealed(sealer: Sealer, entry: PlainEntry, words: list[str], conn: Any) -> SealedEntry:
    assert sealer.active is not None
    namespace, key, value_json = entry.namespace, entry.key, entry.value_json
    provenance_json, text, embedding = entry.provenance_json, entry.text, entry.embedding
    name = record(namespace, key)
    tokens = None
    if text is not None:
        tokens = " ".join(search_tokens(sealer, sealer.active, words))
    return SealedEntry(
        value_json=seal(conn, TABLE, "value_json", name, value_json) or value_json,
        provenance_json=seal(conn, TABLE, "provenance_json", name, provenance_json),
        text=tokens,
        text_sealed=seal(conn, TABLE, "text", name, text),
        embedding=seal_binary(conn, TABLE, "embedding", name, embedding),
    )


def open_text(conn: Any, namespace: str, key: str, text: Any, text_sealed: Any) -> str | None:
    """An entry's searchable text: from ``text_sealed`` when it is sealed, else ``text``."""
    if text_sealed is None:
        return None if text is None else str(text)
    return str(unseal(conn, TABLE, "text", record(namespace, key), text_sealed))


def open_embeddings(
    conn: Any, namespace: str, rows: Sequence[tuple[int, str, Any]]
) -> list[tuple[int, str, bytes]]:
    """``(id, key, embedding)`` rows with each embedding opened (clear ones pass through).
    A namespace's whole matrix is opened at once when vector search loads it, so the
    associated data's common part is built once, not per row."""
    sealer = sealer_of(conn)
    head = f"{TABLE}.embedding/{len(namespace)}/{namespace}/"
    out = []
    start = len(SEALED_BYTES_PREFIX)
    for entry_id, key, stored in rows:
        data = bytes(stored)
        if data.startswith(SEALED_BYTES_PREFIX):
            end = data.index(b":", start)
            key_id = data[start:end].decode("ascii", "replace")
            data = sealer.open_bytes(data[end + 1 :], (head + key).encode(), key_id)
        out.append((entry_id, key, data))
    return out


# -- searching -------------------------------------------------------------------------


def _keys_in_use(conn: SqlRunner, sealer: Sealer, namespace: str) -> list[str]:
    """The key ids whose tokens ``namespace``'s text index may hold: the active key, and a
    retired one only while an entry of the namespace is still sealed under it (a
    rotation in progress)."""
    found = [] if sealer.active is None else [sealer.active]
    for key_id in sealer.variables:
        if key_id == sealer.active:
            continue
        prefix = f"{SEALED_PREFIX}{key_id}:"
        row = _sealed_in_namespace.run(
            conn, namespace=namespace, length=len(prefix), prefix=prefix
        ).first()
        if row is not None:
            found.append(key_id)
    return found


@statement
def _sealed_in_namespace(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, literal_column, select

    from agentctl.store.memory_tables import memory_entries as m

    return (
        select(literal_column("1"))
        .where(
            m.c.namespace == bindparam("namespace"),
            sealed_head_of(m.c.text_sealed, bindparam("length")) == bindparam("prefix"),
        )
        .limit(literal_column("1"))
    )


def query_phrases(conn: SqlRunner, namespace: str, terms: Sequence[str]) -> list[list[str]]:
    """The token phrases that stand for the query ``terms`` in a sealed index: for each
    term and each key in use, the tokens of the term's words in order (a term FTS5 splits
    into several words matches them as a phrase). Empty with encryption off. Needs every
    key in use: a search that cannot see every entry refuses (``encryption.key_missing``)
    rather than answering from part of them."""
    sealer = sealer_of(conn)
    if not sealer.variables and sealer.active is None:
        return []
    phrases: list[list[str]] = []
    keys = _keys_in_use(conn, sealer, namespace)
    if not keys:
        return phrases
    term_words = [words for words in words_of(terms) if words]
    for key_id in keys:
        phrases.extend(search_tokens(sealer, key_id, words) for words in term_words)
    return phrases


# -- enable / rotate ---------------------------------------------------------------------

_COLUMNS = (
    "id",
    "namespace",
    "key",
    "value_json",
    "provenance_json",
    "text",
    "text_sealed",
    "embedding",
)


def _pages(store: Store, batch: int) -> Iterator[list[Any]]:
    """Entries in (namespace, key) order, ``batch`` at a time (keyset pagination on the
    unique index)."""
    after: tuple[str, str] | None = None
    while True:
        with store.read() as conn:
            if after is None:
                rows = list(_first_page.run(conn, batch=batch))
            else:
                rows = list(_next_page.run(conn, namespace=after[0], key=after[1], batch=batch))
        if not rows:
            return
        yield rows
        after = (str(rows[-1][1]), str(rows[-1][2]))


def _page(after: bool) -> Executable:
    from sqlalchemy import bindparam, select, tuple_

    from agentctl.store.memory_tables import memory_entries as m

    query = select(*columns(m, _COLUMNS))
    if after:
        query = query.where(
            tuple_(m.c.namespace, m.c.key) > tuple_(bindparam("namespace"), bindparam("key"))
        )
    return query.order_by(m.c.namespace, m.c.key).limit(bindparam("batch"))


_first_page = Statement(lambda _: _page(False), "memory_first_page")
_next_page = Statement(lambda _: _page(True), "memory_next_page")


def _under(target: str, value: Any) -> bool:
    return value is None or sealed_under(value, target)


def _resealed(sealer: Sealer, row: Sequence[Any]) -> tuple[dict[str, Any], int] | None:
    """The new values of an entry not wholly sealed under the active key (None: it is)."""
    assert sealer.active is not None
    target = sealer.active
    _, namespace, key, value_json, provenance, text, text_sealed, embedding = row
    embedding = None if embedding is None else bytes(embedding)
    text_done = text_sealed is not None and sealed_under(text_sealed, target)
    if text is None and text_sealed is None:
        text_done = True
    embedding_done = embedding is None or sealed_under(embedding, target)
    if _under(target, value_json) and _under(target, provenance) and text_done and embedding_done:
        return None
    name = record(str(namespace), str(key))
    new: dict[str, Any] = {}
    if not _under(target, value_json):
        new["value_json"] = reseal(sealer, TABLE, "value_json", name, value_json)
    if not _under(target, provenance):
        new["provenance_json"] = reseal(sealer, TABLE, "provenance_json", name, provenance)
    if not text_done:
        plain = (
            open_value(sealer, TABLE, "text", name, text_sealed)
            if text_sealed is not None
            else str(text)
        )
        words = index_words(plain)
        new["text"] = " ".join(search_tokens(sealer, sealer.active, words))
        new["text_sealed"] = reseal(sealer, TABLE, "text", name, plain)
    if not embedding_done:
        assert embedding is not None
        new["embedding"] = reseal_binary(sealer, TABLE, "embedding", name, embedding)
    return new, len(new) - (1 if "text_sealed" in new else 0)


def seal_memory(
    store: Store,
    sealer: Sealer,
    *,
    batch: int,
    after_batch: Callable[[], None] | None = None,
) -> tuple[int, int, int]:
    """Re-write every entry not wholly sealed under ``sealer.active``, a batch per write
    transaction, each update conditional on the values it read (a concurrent write wins
    and is sealed by its writer). Returns (rows changed, values sealed, batches)."""
    rows_changed = values_sealed = batches = 0
    for rows in _pages(store, batch):
        updates: list[tuple[Statement, dict[str, Any]]] = []
        for row in rows:
            found = _resealed(sealer, row)
            if found is None:
                continue
            new, count = found
            values_sealed += count
            # Conditional on the values read: NULL is matched by IS NULL, one shape each.
            olds = {"value_json": row[3], "text": row[5], "embedding": row[7]}
            nulls = tuple(column for column, old in olds.items() if old is None)
            values = {f"new_{column}": value for column, value in new.items()}
            values.update({f"old_{c}": old for c, old in olds.items() if old is not None})
            updates.append((_reseal_entry(tuple(new), nulls), {"id": row[0], **values}))
        if not updates:
            continue
        with store.write() as conn:
            for update, values in updates:
                rows_changed += update.run(conn, **values).rowcount
        batches += 1
        if after_batch is not None:
            after_batch()
    return rows_changed, values_sealed, batches


@lru_cache(maxsize=64)
def _reseal_entry(changed: tuple[str, ...], nulls: tuple[str, ...]) -> Statement:
    """Set the ``changed`` columns of entry ``id`` if its value, text and embedding still
    hold their ``old_`` values (``nulls``: NULL)."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, update

        from agentctl.store.memory_tables import memory_entries as m

        return (
            update(m)
            .values({m.c[column]: bindparam(f"new_{column}") for column in changed})
            .where(
                m.c.id == bindparam("id"),
                *(
                    m.c[column].is_(None)
                    if column in nulls
                    else m.c[column] == bindparam(f"old_{column}")
                    for column in ("value_json", "text", "embedding")
                ),
            )
        )

    return Statement(build, f"reseal_entry{(changed, nulls)}")


def rebuild_index(store: Store) -> None:
    """Rebuild SQLite's FTS5 index from the table after a walk: its segments would
    otherwise keep the clear words of entries the walk tokenized until they merge."""
    if store.dialect != "sqlite":
        return
    with store.write() as conn:
        _rebuild_index.run(conn)


@statement
def _rebuild_index(sql: SqlDialect) -> Executable:
    return sql.rebuild_memory_text_index()


# -- inventory ---------------------------------------------------------------------------


#: One column's count: (column, clear values, key id -> sealed values).
Count = tuple[str, int, dict[str, int]]


def column_counts(conn: SqlRunner, key_ids: list[str]) -> list[Count]:
    """Clear and sealed values of memory's payloads (value, provenance, searchable text,
    embedding) per key id, counted without opening any (``db encryption inventory``)."""
    out: list[Count] = []
    # The searchable text: sealed when text_sealed is set (its key made the tokens).
    measured = {
        "value_json": "value_json",
        "provenance_json": "provenance_json",
        "text": "text_sealed",
    }
    heads = {"sealed_length": len(SEALED_PREFIX), "sealed": SEALED_PREFIX}
    for position, key_id in enumerate(key_ids):
        prefix = f"{SEALED_PREFIX}{key_id}:"
        heads.update({f"length_{position}": len(prefix), f"key_{position}": prefix})
    for shown, column in measured.items():
        row = _column_count(shown, column, len(key_ids)).run(conn, **heads).first()
        out.append(_count(shown, row, key_ids))
    heads = {"sealed_length": len(SEALED_BYTES_PREFIX), "sealed": SEALED_BYTES_PREFIX}
    for position, key_id in enumerate(key_ids):
        head_bytes = f"{SEALED_PREFIX}{key_id}:".encode()
        heads.update({f"length_{position}": len(head_bytes), f"key_{position}": head_bytes})
    row = _column_count("embedding", "embedding", len(key_ids)).run(conn, **heads).first()
    out.append(_count("embedding", row, key_ids))
    return out


@lru_cache(maxsize=64)
def _column_count(shown: str, column: str, keys: int) -> Statement:
    """Values of ``shown`` (counted by ``column``'s head): all, sealed, and sealed under
    each of ``keys`` key ids. The embedding's head is compared as bytes."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, case, func, literal_column, select

        from agentctl.store.memory_tables import memory_entries as m

        def head(length: str) -> Any:
            if column == "embedding":
                return func.substr(m.c.embedding, literal_column("1"), bindparam(length))
            return sealed_head_of(m.c[column], bindparam(length))

        def number(length: str, value: str) -> Any:
            one: Any = literal_column("1")
            zero: Any = literal_column("0")
            return func.sum(case((head(length) == bindparam(value), one), else_=zero))

        return select(
            func.count(m.c[shown]),
            number("sealed_length", "sealed"),
            *(number(f"length_{k}", f"key_{k}") for k in range(keys)),
        )

    return Statement(build, f"memory_column_count{(shown, column, keys)}")


def _count(column: str, row: Any, key_ids: list[str]) -> Count:
    total, sealed = int(row[0] or 0), int(row[1] or 0)
    by_key: dict[str, int] = {}
    named = 0
    for position, key_id in enumerate(key_ids):
        value = int(row[2 + position] or 0)
        named += value
        if value:
            by_key[key_id] = value
    if sealed - named:
        by_key["?"] = sealed - named
    return (column, total - sealed, by_key)
