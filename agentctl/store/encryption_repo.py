"""Encryption keys and the sealing of existing rows: ``agentctl db encryption``.

``encryption_keys`` records each key id, the variable that held its key and a check value
sealed under it; :func:`load_sealer` turns it into the store's :class:`Sealer` at open.
:func:`seal_existing` walks every payload column (``sealing.PAYLOAD_COLUMNS``) in key order,
a batch of rows per short write transaction, and re-writes each value not yet sealed under
the active key. Each update is conditional on the value it read, so a row another process
changed meanwhile is left to the next pass instead of being overwritten; an interrupted
walk (SIGKILL, a lost server) leaves every batch it committed sealed and the rest readable,
and running it again finishes the job. The database stays usable throughout.
Long-term memory has its own walk and counts (store/memory_sealing.py): its text index
holds search tokens derived from the key, not sealed values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from agentctl.errors import PersistenceError, UsageError
from agentctl.store import memory_sealing
from agentctl.store.dialect import SQLITE
from agentctl.store.keyring import CLEAR, SEALED_PREFIX, Sealer
from agentctl.store.sealing import (
    PAYLOAD_COLUMNS,
    PayloadColumns,
    is_sealed,
    key_id_of,
    reseal,
    sealed_head_of,
    sealed_under,
)
from agentctl.store.statements import Statement, columns, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner, Store

__all__ = [
    "BATCH_ROWS",
    "ColumnCount",
    "KeyRecord",
    "SealReport",
    "activate_key",
    "column_counts",
    "inventory",
    "keys",
    "load_sealer",
    "seal_existing",
    "seal_under",
    "scrub",
]

#: Rows per write transaction of ``enable``/``rotate``: short enough that a run's writes
#: interleave with the walk, long enough that the commits do not dominate.
BATCH_ROWS = 200
_CHECK_AAD = b"encryption_keys.check_value"
_CHECK_TEXT = "agentctl encryption key check"


@dataclass(frozen=True, slots=True)
class KeyRecord:
    key_id: str
    key_env: str
    status: str
    created_at: datetime | None


@dataclass(slots=True)
class ColumnCount:
    """How many values of one payload column are clear and sealed under each key."""

    table: str
    column: str
    clear: int = 0
    sealed: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class SealReport:
    rows_changed: int = 0
    values_sealed: int = 0
    batches: int = 0


def keys(conn: SqlRunner) -> list[KeyRecord]:
    rows = _keys.run(conn)
    out = []
    for row in rows:
        stamp = row[3]
        if isinstance(stamp, str):
            from agentctl.store.timestamps import from_db

            stamp = from_db(stamp)
        out.append(KeyRecord(str(row[0]), str(row[1]), str(row[2]), stamp))
    return out


@statement
def _keys(_: SqlDialect) -> Executable:
    from sqlalchemy import select

    from agentctl.store.key_tables import encryption_keys as k

    return select(k.c.key_id, k.c.key_env, k.c.status, k.c.created_at).order_by(k.c.created_at)


def load_sealer(store: Store) -> Sealer:
    """The store's sealer from ``encryption_keys`` (:data:`CLEAR` when none was enabled;
    a database older than the table, opened without upgrading, has none either)."""
    try:
        # At the driver: opening a store makes no SQLAlchemy engine (store/engine.py).
        with store.driver_session() as session, session.read() as conn:
            found = keys(conn)
    except (PersistenceError, SQLAlchemyError):
        return CLEAR
    if not found:
        return CLEAR
    active = next((k.key_id for k in found if k.status == "active"), None)
    return Sealer(
        active=active,
        variables={k.key_id: k.key_env for k in found},
        binary=seals_as_bytes(store),
    )


def seals_as_bytes(store: Store) -> bool:
    """Whether the store writes sealed payloads as bytes: a SQLite column takes bytes
    whatever its declared type; PostgreSQL's payload columns are ``text``."""
    return store.dialect == SQLITE


def _check_value(conn: SqlRunner, key_id: str) -> str | None:
    row = _check.run(conn, key_id=key_id).first()
    return None if row is None else str(row[0])


@statement
def _check(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.key_tables import encryption_keys as k

    return select(k.c.check_value).where(k.c.key_id == bindparam("key_id"))


@statement
def _retire_others(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.key_tables import encryption_keys as k

    return (
        update(k)
        .values(status="retired")
        .where(k.c.key_id != bindparam("key_id"), k.c.status == "active")
    )


@statement
def _reactivate(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.key_tables import encryption_keys as k

    return (
        update(k)
        .values(status="active", key_env=bindparam("key_env"))
        .where(k.c.key_id == bindparam("key_id"))
    )


@statement
def _retire_active(_: SqlDialect) -> Executable:
    from sqlalchemy import update

    from agentctl.store.key_tables import encryption_keys as k

    return update(k).values(status="retired").where(k.c.status == "active")


@statement
def _insert_key(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.key_tables import encryption_keys as k

    return insert(k).values(
        key_id=bindparam("key_id"),
        key_env=bindparam("key_env"),
        status="active",
        check_value=bindparam("check_value"),
        created_at=bindparam("created_at"),
    )


def verify_key(sealer: Sealer, key_id: str, check_value: str) -> None:
    """Raise ``encryption.key_mismatch`` when the key offered as ``key_id`` is not the one
    that was enabled under that id (``encryption.key_missing`` when none is offered)."""
    sealer.open_text(check_value, _CHECK_AAD + b"/" + key_id.encode())


def activate_key(store: Store, key_id: str, key_env: str, key: bytes) -> Sealer:
    """Make ``key_id`` the key new values are sealed under (the former active key is
    retired but still opens what it sealed) and return the store's new sealer. A key id
    recorded before must come with the same key."""
    with store.write() as conn:
        known = {k.key_id: k for k in keys(conn)}
        sealer = Sealer(
            active=key_id,
            variables={**{k: r.key_env for k, r in known.items()}, key_id: key_env},
            given={key_id: key},
            binary=seals_as_bytes(store),
        )
        aad = _CHECK_AAD + b"/" + key_id.encode()
        if key_id in known:
            check = _check_value(conn, key_id)
            assert check is not None
            verify_key(sealer, key_id, check)
            _retire_others.run(conn, key_id=key_id)
            _reactivate.run(conn, key_env=key_env, key_id=key_id)
        else:
            _retire_active.run(conn)
            _insert_key.run(
                conn,
                key_id=key_id,
                key_env=key_env,
                check_value=sealer.seal_text(_CHECK_TEXT, aad),
                created_at=to_db(datetime.now(UTC)),
            )
    store.use_sealer(sealer)
    return sealer


def column_counts(conn: SqlRunner, key_ids: list[str]) -> list[ColumnCount]:
    """Clear and sealed values of every payload column, per key id (``?`` for an id no
    row of ``encryption_keys`` names)."""
    out: list[ColumnCount] = []
    heads: dict[str, Any] = {"sealed_length": len(SEALED_PREFIX), "sealed": SEALED_PREFIX}
    for position, key_id in enumerate(key_ids):
        prefix = f"{SEALED_PREFIX}{key_id}:"
        heads.update({f"length_{position}": len(prefix), f"key_{position}": prefix})
    for spec in PAYLOAD_COLUMNS.values():
        for column in spec.columns:
            count_of = _column_count(spec.table, column, len(key_ids))
            row = count_of.run(conn, **heads).first()
            total, sealed = int(row[0] or 0), int(row[1] or 0)
            count = ColumnCount(spec.table, column, clear=total - sealed)
            named = 0
            for position, key_id in enumerate(key_ids):
                value = int(row[2 + position] or 0)
                named += value
                if value:
                    count.sealed[key_id] = value
            if sealed - named:
                count.sealed["?"] = sealed - named
            out.append(count)
    out.extend(
        ColumnCount(memory_sealing.TABLE, column, clear, sealed)
        for column, clear, sealed in memory_sealing.column_counts(conn, key_ids)
    )
    return out


@lru_cache(maxsize=256)
def _column_count(table: str, column: str, keys: int) -> Statement:
    """Values of ``table.column``: all, sealed, and sealed under each of ``keys`` key ids
    (parameters ``sealed_length``/``sealed``, ``length_N``/``key_N``)."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, case, func, literal_column, select

        from agentctl.store.tables import metadata

        values = metadata.tables[table].c[column]

        def number(length: str, head: str) -> Any:
            one: Any = literal_column("1")
            zero: Any = literal_column("0")
            matched = sealed_head_of(values, bindparam(length)) == bindparam(head)
            return func.sum(case((matched, one), else_=zero))

        return select(
            func.count(values),
            number("sealed_length", "sealed"),
            *(number(f"length_{k}", f"key_{k}") for k in range(keys)),
        )

    return Statement(build, f"column_count{(table, column, keys)}")


def _pages(store: Store, spec: PayloadColumns, batch: int) -> Iterator[list[Any]]:
    """The table's rows in key order, ``batch`` at a time (keyset pagination: each page
    is one indexed read however far the walk has gone)."""
    after: tuple[Any, ...] | None = None
    while True:
        with store.read() as conn:
            if after is None:
                rows = list(_page(spec, False).run(conn, batch=batch))
            else:
                keys = {f"after_{k}": value for k, value in zip(spec.key, after, strict=True)}
                rows = list(_page(spec, True).run(conn, batch=batch, **keys))
        if not rows:
            return
        yield rows
        after = tuple(rows[-1][: len(spec.key)])


@lru_cache(maxsize=64)
def _page(spec: PayloadColumns, after: bool) -> Statement:
    """A page of ``spec``'s table in key order, the first or the one ``after_KEY``."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select, tuple_

        from agentctl.store.tables import metadata

        table = metadata.tables[spec.table]
        key = columns(table, spec.key)
        query = select(*key, *columns(table, spec.columns))
        if after:
            marks: list[Any] = [bindparam(f"after_{name}") for name in spec.key]
            query = query.where(
                key[0] > marks[0] if len(key) == 1 else tuple_(*key) > tuple_(*marks)
            )
        return query.order_by(*key).limit(bindparam("batch"))

    return Statement(build, f"page{(spec.table, after)}")


@lru_cache(maxsize=256)
def _reseal_row(table: str, key: tuple[str, ...], changed: tuple[str, ...]) -> Statement:
    """Set the ``changed`` columns of the row ``key_…`` names to ``new_…`` if they still
    hold ``old_…``."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, update

        from agentctl.store.tables import metadata

        t = metadata.tables[table]
        return (
            update(t)
            .values({t.c[c]: bindparam(f"new_{c}") for c in changed})
            .where(
                *(t.c[k] == bindparam(f"key_{k}") for k in key),
                *(t.c[c] == bindparam(f"old_{c}") for c in changed),
            )
        )

    return Statement(build, f"reseal_row{(table, key, changed)}")


def seal_existing(
    store: Store,
    sealer: Sealer,
    *,
    batch: int = BATCH_ROWS,
    after_batch: Callable[[], None] | None = None,
) -> SealReport:
    """Re-write every payload value not sealed under ``sealer.active`` (clear, or sealed
    under an older key, which must be offered) sealed under it, a batch per transaction."""
    assert sealer.active is not None
    report = SealReport()
    for spec in PAYLOAD_COLUMNS.values():
        width = len(spec.key)
        for rows in _pages(store, spec, batch):
            updates: list[tuple[Statement, dict[str, Any]]] = []
            for row in rows:
                record = tuple(row[:width])
                changed: list[tuple[str, Any, str | bytes]] = []
                for column, stored in zip(spec.columns, row[width:], strict=True):
                    if stored is None or sealed_under(stored, sealer.active):
                        continue
                    new = reseal(sealer, spec.table, column, record, stored)
                    changed.append((column, stored, new))
                if not changed:
                    continue
                names = tuple(column for column, _, _ in changed)
                values = {f"key_{k}": part for k, part in zip(spec.key, record, strict=True)}
                for column, old, new in changed:
                    values.update({f"old_{column}": old, f"new_{column}": new})
                updates.append((_reseal_row(spec.table, spec.key, names), values))
                report.values_sealed += len(changed)
            if not updates:
                continue
            with store.write() as conn:
                for update, values in updates:
                    report.rows_changed += update.run(conn, **values).rowcount
            report.batches += 1
            if after_batch is not None:
                after_batch()
    memory_rows, memory_values, batches = memory_sealing.seal_memory(
        store, sealer, batch=batch, after_batch=after_batch
    )
    report.rows_changed += memory_rows
    report.values_sealed += memory_values
    report.batches += batches
    if batches:
        memory_sealing.rebuild_index(store)
    return report


def require_key_id_free_or_same(store: Store, key_id: str, *, rotating: bool) -> str | None:
    """The active key id, after checking ``enable``/``rotate`` may use ``key_id``."""
    with store.read() as conn:
        found = keys(conn)
    active = next((k.key_id for k in found if k.status == "active"), None)
    if not rotating and active is not None and active != key_id:
        raise UsageError(
            f"encryption is already enabled under key {active!r}",
            code="encryption.already_enabled",
            hint=f"re-seal under {key_id} with `agentctl db encryption rotate --key-id "
            f"{key_id} --key-env VAR`",
        )
    if rotating and active is None:
        raise UsageError(
            "encryption is not enabled on this database: there is no key to rotate",
            code="encryption.not_enabled",
            hint="enable it first with `agentctl db encryption enable --key-id ID --key-env VAR`",
        )
    return active


def scrub(store: Store) -> None:
    """Drop the clear copies a re-write leaves behind on SQLite: the old page images in
    the write-ahead log (checkpointed and truncated) and the freed pages of the file
    (VACUUM rewrites it). PostgreSQL keeps dead row versions until its own VACUUM
    (docs/encryption.md says so)."""
    if store.dialect != "sqlite" or store.in_memory:
        return
    with store.driver_session() as session:
        session.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        session.exec_driver_sql("VACUUM")
        session.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def sealed_key_ids(value: str | bytes | None) -> str | None:
    return key_id_of(value) if value is not None and is_sealed(value) else None


def inventory(store: Store) -> dict[str, Any]:
    """What is sealed under which key and what is still clear (``db encryption
    inventory``): readable without any key."""
    with store.read() as conn:
        found = keys(conn)
        counts = column_counts(conn, [k.key_id for k in found])
    active = next((k.key_id for k in found if k.status == "active"), None)
    return {
        "enabled": active is not None,
        "activeKeyId": active,
        "keys": [
            {
                "keyId": k.key_id,
                "keyEnv": k.key_env,
                "status": k.status,
                "createdAt": None if k.created_at is None else k.created_at.isoformat(),
            }
            for k in found
        ],
        "columns": [
            {"table": c.table, "column": c.column, "clear": c.clear, "sealed": c.sealed}
            for c in counts
        ],
        "clearValues": sum(c.clear for c in counts),
        "sealedValues": sum(sum(c.sealed.values()) for c in counts),
    }


def seal_under(
    store: Store,
    key_id: str,
    key_env: str,
    *,
    rotating: bool,
    dry_run: bool = False,
    batch: int = BATCH_ROWS,
    after_batch: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """``db encryption enable`` (``rotating=False``) or ``rotate``: make ``key_id`` (its
    key in ``$key_env``) the active key and seal every payload value under it."""
    import os

    from agentctl.store.keyring import check_key_id, key_from_text

    check_key_id(key_id)
    text = os.environ.get(key_env, "")
    if not text.strip():
        raise UsageError(
            f"${key_env} is not set: it must hold the base64 32-byte key {key_id}",
            code="encryption.bad_key",
            hint=f'export {key_env}=$(python -c "import os,base64;'
            'print(base64.b64encode(os.urandom(32)).decode())") and keep a copy safe',
        )
    key = key_from_text(text, f"${key_env}")
    previous = require_key_id_free_or_same(store, key_id, rotating=rotating)
    before = inventory(store)
    to_seal = sum(
        c["clear"] + sum(n for k, n in c["sealed"].items() if k != key_id)
        for c in before["columns"]
    )
    data: dict[str, Any] = {
        "operation": "rotate" if rotating else "enable",
        "keyId": key_id,
        "keyEnv": key_env,
        "previousKeyId": previous,
        "dryRun": dry_run,
        "valuesToSeal": to_seal,
    }
    if dry_run:
        with store.read() as conn:
            check = _check_value(conn, key_id)
        if check is not None:
            verify_key(Sealer(given={key_id: key}), key_id, check)
        data.update(valuesSealed=0, batches=0)
        return data
    sealer = activate_key(store, key_id, key_env, key)
    report = seal_existing(store, sealer, batch=batch, after_batch=after_batch)
    scrub(store)
    after = inventory(store)
    data.update(
        valuesSealed=report.values_sealed,
        batches=report.batches,
        clearValuesLeft=after["clearValues"],
        otherKeyValuesLeft=sum(
            n for c in after["columns"] for k, n in c["sealed"].items() if k != key_id
        ),
    )
    return data
