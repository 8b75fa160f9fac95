"""An operator's conclusions on effects (``reconciliations``): append-only rows, the latest
one wins, its evidence and result sealed under the row when encryption is on.

Every function runs inside the caller's transaction; the journal
(agentctl/engine/effects/journal.py) settles the effect's budget in the same one.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic.dataclasses import dataclass as record

from agentctl.error_codes import ErrorCode
from agentctl.errors import PersistenceError
from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.rows import row_dict, row_dicts
from agentctl.store.sealing import seal, unseal_record, unseal_records
from agentctl.store.statements import columns, statement
from agentctl.store.timestamps import to_db
from agentctl.typed_records import CAMEL, CamelRecord, IsoDateTime

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "RECONCILIATION_COLUMNS",
    "Reconciliation",
    "ReconciliationStatus",
    "append_compensated",
    "insert_reconciliation",
    "latest_reconciliation",
    "reconciliations",
]

RECONCILIATION_COLUMNS = (
    "id",
    "format_version",
    "effect_id",
    "status",
    "reason",
    "actor",
    "evidence",
    "result_json",
    "result_validated",
    "compensation_effect_id",
    "supersedes_id",
    "created_at",
)
_RECONCILIATION_TIMES = frozenset({"created_at"})


ReconciliationStatus = Literal["applied", "not_applied", "compensated"]


@record(frozen=True, slots=True, config=CAMEL)
class Reconciliation(CamelRecord):
    """An operator's conclusion on an effect (append-only); its JSON form is what
    ``effects inspect`` and ``inspect`` show."""

    id: int
    effect_id: str
    status: ReconciliationStatus
    reason: str
    actor: str
    evidence: str | None
    result: Any
    result_validated: bool
    compensation_effect_id: str | None
    created_at: IsoDateTime


_RECONCILIATION_SAME_NAME = tuple(
    name for name in Reconciliation.__dataclass_fields__ if name != "result"
)


def _reconciliation(row: dict[str, Any] | None) -> Reconciliation | None:
    """The record of an (unsealed) reconciliation row (a corrupt one: ``store.corrupt``)."""
    if row is None:
        return None
    check_format_version("reconciliation", row["id"], int(row["format_version"]))
    try:
        return Reconciliation(
            **{name: row[name] for name in _RECONCILIATION_SAME_NAME},
            result=None if row["result_json"] is None else json.loads(row["result_json"]),
        )
    except ValueError as exc:
        raise PersistenceError(
            f"reconciliation {row['id']} of effect {row['effect_id']} has a corrupt record: {exc}",
            code=ErrorCode.STORE_CORRUPT,
            hint="the database was modified outside agentctl; restore it from a backup",
        ) from exc


def _read_reconciliation(conn: SqlRunner, row: Any) -> Reconciliation | None:
    return _reconciliation(
        unseal_record(
            conn, "reconciliations", row_dict(row, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
        )
    )


def latest_reconciliation(conn: SqlRunner, effect_id: str) -> Reconciliation | None:
    return _read_reconciliation(conn, _latest_reconciliation.run(conn, effect_id=effect_id).first())


@statement
def _latest_reconciliation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import reconciliations

    c = reconciliations.c
    return (
        select(*columns(reconciliations, RECONCILIATION_COLUMNS))
        .where(c.effect_id == bindparam("effect_id"))
        .order_by(c.id.desc())
        .limit(1)
    )


def reconciliations(conn: SqlRunner, effect_id: str) -> list[Reconciliation]:
    rows = _reconciliations.run(conn, effect_id=effect_id)
    opened = unseal_records(
        conn, "reconciliations", row_dicts(rows, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
    )
    return [found for row in opened if (found := _reconciliation(row)) is not None]


@statement
def _reconciliations(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import reconciliations

    c = reconciliations.c
    return (
        select(*columns(reconciliations, RECONCILIATION_COLUMNS))
        .where(c.effect_id == bindparam("effect_id"))
        .order_by(c.id)
    )


def insert_reconciliation(
    conn: SqlRunner,
    effect_id: str,
    *,
    status: ReconciliationStatus,
    reason: str,
    actor: str,
    evidence: str | None,
    result_json: str | None,
    result_validated: bool,
    compensation_effect_id: str | None,
    supersedes_id: int | None,
    now: datetime,
) -> Reconciliation:
    """Append one conclusion (append-only; the latest wins) and return its row."""
    # RETURNING (SQLite 3.35+, PostgreSQL) names the new row on both dialects. The payload
    # is sealed under the new row's id, so it is written once that id is known (same
    # transaction: nothing is ever stored in clear).
    inserted = _insert_reconciliation.run(
        conn,
        effect_id=effect_id,
        status=status,
        reason=reason,
        actor=actor,
        result_validated=int(result_validated),
        compensation_effect_id=compensation_effect_id,
        supersedes_id=supersedes_id,
        created_at=to_db(now),
    )
    new_id = inserted.first()[0]
    if evidence is not None or result_json is not None:
        record = (new_id,)
        _seal_reconciliation.run(
            conn,
            evidence=seal(conn, "reconciliations", "evidence", record, evidence),
            result_json=seal(conn, "reconciliations", "result_json", record, result_json),
            id=new_id,
        )
    found = _read_reconciliation(conn, _reconciliation_by_id.run(conn, id=new_id).first())
    assert found is not None
    return found


@statement
def _insert_reconciliation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.journal_tables import reconciliations

    given = (
        "effect_id",
        "status",
        "reason",
        "actor",
        "result_validated",
        "compensation_effect_id",
        "supersedes_id",
        "created_at",
    )
    return (
        insert(reconciliations)
        .values(format_version=FORMAT_VERSION, **{name: bindparam(name) for name in given})
        .returning(reconciliations.c.id)
    )


@statement
def _seal_reconciliation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.journal_tables import reconciliations

    return (
        update(reconciliations)
        .where(reconciliations.c.id == bindparam("id"))
        .values(evidence=bindparam("evidence"), result_json=bindparam("result_json"))
    )


@statement
def _reconciliation_by_id(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import reconciliations

    return select(*columns(reconciliations, RECONCILIATION_COLUMNS)).where(
        reconciliations.c.id == bindparam("id")
    )


def append_compensated(
    conn: SqlRunner,
    effect_id: str,
    *,
    reason: str,
    actor: str,
    compensation_effect_id: str | None,
    now: datetime,
) -> None:
    """Append ``compensated`` to an effect, superseding its latest conclusion."""
    previous = _latest_reconciliation.run(conn, effect_id=effect_id).first()
    _insert_reconciliation.run(
        conn,
        effect_id=effect_id,
        status="compensated",
        reason=reason,
        actor=actor,
        result_validated=0,
        compensation_effect_id=compensation_effect_id,
        supersedes_id=None if previous is None else previous[0],
        created_at=to_db(now),
    )
