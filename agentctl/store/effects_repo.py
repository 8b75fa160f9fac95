"""Effect journal rows: effects and the tool calls they carry (an operator's conclusions on
them are :mod:`agentctl.store.reconciliations_repo`'s).

An effect is one record, :class:`EffectRecord`, written and read back as it is: the
journal hands it to :func:`insert_effect` and gets it from :func:`effect` and
:func:`effects`, with no mapping of its own between a row and the record.

Every function runs inside the caller's transaction (``Store.write()`` / ``Store.read()``
or the executor's driver session): the engine decides what commits together. A tool call's
terminal status is written by :func:`finish_tool_call` in the same transaction as its
effect's (the gate calls both inside one ``write()``). Status changes of an effect go
through :func:`agentctl.store.transitions.guarded_update`, not through this module.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field
from pydantic.dataclasses import dataclass as record

from agentctl.digest import canonical_json
from agentctl.error_codes import ErrorCode
from agentctl.errors import PersistenceError
from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.rows import naive, row_dict, row_dicts
from agentctl.store.sealing import seal, unseal, unseal_record, unseal_records
from agentctl.store.statements import Statement, columns, one_of, statement
from agentctl.store.states import EffectState
from agentctl.store.timestamps import to_db
from agentctl.typed_records import CAMEL, CamelRecord, IsoDateTime

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "EFFECT_COLUMNS",
    "EffectRecord",
    "effect",
    "effect_at",
    "effect_ids_with_prefix",
    "effects",
    "finish_tool_call",
    "insert_effect",
    "insert_tool_call",
    "tool_calls",
    "unsettled_effect_ids",
]

EFFECT_COLUMNS = (
    "id",
    "format_version",
    "run_id",
    "task_id",
    "attempt",
    "ordinal",
    "operation",
    "input_digest",
    "effect_class",
    "idempotency",
    "risk",
    "idempotency_key",
    "status",
    "request_json",
    "result_json",
    "error_json",
    "confirmed",
    "trace_id",
    "requested_at",
    "started_at",
    "finished_at",
)
_EFFECT_TIMES = frozenset({"requested_at", "started_at", "finished_at"})


# -- effects ----------------------------------------------------------------------------


@record(frozen=True, slots=True, config=CAMEL)
class EffectRecord(CamelRecord):
    """One journaled effect as stored; its JSON form is what ``effects list``, ``inspect``
    and the dashboard show (the id is ``effectId`` there)."""

    id: Annotated[str, Field(alias="effectId")]
    run_id: str
    task_id: str
    attempt: int
    ordinal: int
    operation: str
    input_digest: str
    effect_class: str
    idempotency: str
    risk: str
    idempotency_key: str | None
    status: EffectState
    confirmed: bool
    request: Any
    result: Any
    error: Any
    requested_at: IsoDateTime
    started_at: IsoDateTime | None
    finished_at: IsoDateTime | None


#: The record's fields stored in a column of the same name, and those stored as JSON text.
_SAME_NAME = tuple(
    name for name in EffectRecord.__dataclass_fields__ if name not in {"request", "result", "error"}
)
_AS_JSON = (("request", "request_json"), ("result", "result_json"), ("error", "error_json"))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _dumps(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _effect_record(row: Mapping[str, Any] | None) -> EffectRecord | None:
    """The record of an (unsealed) effect row; a row written by a newer release is refused
    (exit 5) and a row that does not parse is named as corrupt."""
    if row is None:
        return None
    check_format_version("effect", row["id"], int(row["format_version"]))
    try:
        return EffectRecord(
            **{name: row[name] for name in _SAME_NAME},
            **{name: _loads(row[column]) for name, column in _AS_JSON},
        )
    except ValueError as exc:
        raise PersistenceError(
            f"effect {row['id']} of run {row['run_id']} has a corrupt record: {exc}",
            code=ErrorCode.STORE_CORRUPT,
            hint="the database was modified outside agentctl; restore it from a backup",
            run_id=row["run_id"],
        ) from exc


def effect(conn: SqlRunner, effect_id: str) -> EffectRecord | None:
    """The journaled effect, or None."""
    row = _effect.run(conn, effect_id=effect_id).first()
    return _effect_record(
        unseal_record(conn, "effects", row_dict(row, EFFECT_COLUMNS, _EFFECT_TIMES))
    )


@statement
def _effect(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import effects

    return select(*columns(effects, EFFECT_COLUMNS)).where(effects.c.id == bindparam("effect_id"))


def effect_at(
    conn: SqlRunner, run_id: str, task_id: str, attempt: int, ordinal: int
) -> EffectRecord | None:
    """The effect journaled at one position of one attempt (the first, should a database
    written before positions were checked hold two), or None."""
    row = _effect_at.run(
        conn, run_id=run_id, task_id=task_id, attempt=attempt, ordinal=ordinal
    ).first()
    return _effect_record(
        unseal_record(conn, "effects", row_dict(row, EFFECT_COLUMNS, _EFFECT_TIMES))
    )


@statement
def _effect_at(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import effects

    c = effects.c
    return (
        select(*columns(effects, EFFECT_COLUMNS))
        .where(
            c.run_id == bindparam("run_id"),
            c.task_id == bindparam("task_id"),
            c.attempt == bindparam("attempt"),
            c.ordinal == bindparam("ordinal"),
        )
        .order_by(c.requested_at, c.id)
        .limit(1)
    )


def effect_ids_with_prefix(conn: SqlRunner, prefix: str, limit: int = 2) -> list[str]:
    rows = _effect_ids_like.run(conn, pattern=prefix + "%", limit=limit)
    return [str(row[0]) for row in rows]


@statement
def _effect_ids_like(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import effects

    return (
        select(effects.c.id)
        .where(effects.c.id.like(bindparam("pattern")))
        .limit(bindparam("limit"))
    )


def effects(
    conn: SqlRunner,
    run_id: str,
    *,
    task_id: str | None = None,
    statuses: tuple[str, ...] = (),
) -> list[EffectRecord]:
    """A run's effects in journal order (requested, then task, attempt and ordinal)."""
    values = {f"status_{n}": status for n, status in enumerate(statuses)}
    rows = _effects_of(task_id is not None, len(statuses)).run(
        conn, run_id=run_id, task_id=task_id, **values
    )
    opened = unseal_records(conn, "effects", row_dicts(rows, EFFECT_COLUMNS, _EFFECT_TIMES))
    return [found for row in opened if (found := _effect_record(row)) is not None]


@lru_cache(maxsize=32)
def _effects_of(of_task: bool, statuses: int) -> Statement:
    """The statement of :func:`effects`, per shape: one task or all, how many statuses."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.journal_tables import effects

        c = effects.c
        query = select(*columns(effects, EFFECT_COLUMNS)).where(c.run_id == bindparam("run_id"))
        if of_task:
            query = query.where(c.task_id == bindparam("task_id"))
        if statuses:
            query = query.where(c.status.in_([bindparam(f"status_{n}") for n in range(statuses)]))
        return query.order_by(c.requested_at, c.task_id, c.attempt, c.ordinal)

    return Statement(build, f"effects_of({of_task}, {statuses})")


def unsettled_effect_ids(conn: SqlRunner, run_id: str | None = None) -> list[str]:
    """Ids of started or uncertain effects (of one run, or of all), oldest request first."""
    if run_id is None:
        rows = _unsettled.run(conn)
    else:
        rows = _unsettled_of_run.run(conn, run_id=run_id)
    return [str(row[0]) for row in rows]


def _unsettled_query() -> Select[tuple[str]]:
    from sqlalchemy import select

    from agentctl.store.journal_tables import effects

    return (
        select(effects.c.id)
        .where(one_of(effects.c.status, ("started", "uncertain")))
        .order_by(effects.c.requested_at)
    )


@statement
def _unsettled(_: SqlDialect) -> Executable:
    return _unsettled_query()


@statement
def _unsettled_of_run(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.journal_tables import effects

    return _unsettled_query().where(effects.c.run_id == bindparam("run_id"))


def insert_effect(
    conn: SqlRunner, effect: EffectRecord, *, trace_ids: tuple[str, str] | None = None
) -> EffectRecord:
    """Journal ``effect`` (the journal passes a ``requested`` one whose idempotency key is
    its id); ``trace_ids`` are those of its span when telemetry is on. Returns the record
    as :func:`effect` would read it back (payloads through their stored JSON, times naive
    UTC), without the round trip of reading it."""
    found = _insert(conn, effect, trace_ids, _insert_effect)
    assert found is not None  # an unconditional INSERT inserts (or raises)
    return found


def insert_effect_at_empty_position(
    conn: SqlRunner, effect: EffectRecord, *, trace_ids: tuple[str, str] | None = None
) -> EffectRecord | None:
    """:func:`insert_effect` unless an effect is journaled at ``effect``'s position (run,
    task, attempt, ordinal) already: one ``INSERT … SELECT … WHERE NOT EXISTS``, the
    position's read and the insert in one statement. None: nothing was inserted (read
    what is there with :func:`effect_at`). Exact where the caller's transaction holds what
    serialises the task's writers (the run's lock, or a claim's fence before it commits)."""
    return _insert(conn, effect, trace_ids, _insert_effect_if_empty)


def _insert(
    conn: SqlRunner,
    effect: EffectRecord,
    trace_ids: tuple[str, str] | None,
    insert: Statement,
) -> EffectRecord | None:
    values: dict[str, Any] = {name: getattr(effect, name) for name in _SAME_NAME}
    values["confirmed"] = int(effect.confirmed)  # an integer flag on both dialects
    stored: dict[str, Any] = {}
    for name, column in _AS_JSON:
        text = _dumps(getattr(effect, name))
        values[column] = seal(conn, "effects", column, (effect.id,), text)
        stored[name] = _loads(text)
    for column in _EFFECT_TIMES:
        values[column] = to_db(values[column])
        stored[column] = naive(values[column])
    inserted = insert.run(
        conn,
        **values,
        trace_id=None if trace_ids is None else trace_ids[0],
        span_id=None if trace_ids is None else trace_ids[1],
    )
    if inserted.rowcount == 0:
        return None
    return dataclasses.replace(effect, **stored)


@statement
def _insert_effect(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.journal_tables import effects

    given = (*_SAME_NAME, *(column for _, column in _AS_JSON), "trace_id", "span_id")
    return insert(effects).values(
        format_version=FORMAT_VERSION, **{name: bindparam(name) for name in given}
    )


@statement
def _insert_effect_if_empty(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, exists, insert, literal, select

    from agentctl.store.journal_tables import effects

    given = (*_SAME_NAME, *(column for _, column in _AS_JSON), "trace_id", "span_id")
    c = effects.alias("journaled").c
    taken = exists(
        select(c.id).where(
            c.run_id == bindparam("run_id"),
            c.task_id == bindparam("task_id"),
            c.attempt == bindparam("attempt"),
            c.ordinal == bindparam("ordinal"),
        )
    )
    row = select(
        literal(FORMAT_VERSION), *(bindparam(name, type_=effects.c[name].type) for name in given)
    ).where(~taken)
    return insert(effects).from_select(["format_version", *given], row)


# -- tool calls -------------------------------------------------------------------------


def insert_tool_call(
    conn: SqlRunner,
    *,
    effect_id: str,
    run_id: str,
    task_id: str,
    tool: str,
    arguments_json: str,
    now: datetime,
) -> None:
    """Record a model's tool call as ``requested`` (once: its id is its effect's)."""
    _insert_tool_call.run(
        conn,
        effect_id=effect_id,
        run_id=run_id,
        task_id=task_id,
        tool=tool,
        arguments_json=seal(conn, "tool_calls", "arguments_json", (effect_id,), arguments_json),
        created_at=to_db(now),
    )


@statement
def _insert_tool_call(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.journal_tables import tool_calls

    given = ("run_id", "task_id", "effect_id", "tool", "arguments_json", "created_at")
    return sql.insert_ignoring(tool_calls).values(
        id=bindparam("effect_id"),  # a tool call's id is its effect's
        format_version=1,
        status="requested",
        **{name: bindparam(name) for name in given},
    )


def finish_tool_call(
    conn: SqlRunner,
    effect_id: str,
    *,
    status: str,
    result_json: str | None,
    error_json: str | None,
    now: datetime,
) -> None:
    """The tool call's terminal status: call it in the transaction of its effect's."""
    _finish_tool_call.run(
        conn,
        status=status,
        result_json=seal(conn, "tool_calls", "result_json", (effect_id,), result_json),
        error_json=seal(conn, "tool_calls", "error_json", (effect_id,), error_json),
        finished_at=to_db(now),
        effect_id=effect_id,
    )


@statement
def _finish_tool_call(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.journal_tables import tool_calls

    given = ("status", "result_json", "error_json", "finished_at")
    return (
        update(tool_calls)
        .where(tool_calls.c.effect_id == bindparam("effect_id"))
        .values(**{name: bindparam(name) for name in given})
    )


def tool_calls(conn: SqlRunner, run_id: str) -> list[tuple[str, str, str, str, str]]:
    """``(effect_id, task_id, tool, status, arguments_json)`` of a run's tool calls."""
    rows = _tool_calls.run(conn, run_id=run_id)
    # A tool call's id is its effect's id.
    return [
        (row[0], row[1], row[2], row[3], unseal(conn, "tool_calls", "arguments_json", key, row[4]))
        for row in rows
        for key in [(row[0],)]
    ]


@statement
def _tool_calls(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import tool_calls

    c = tool_calls.c
    return (
        select(c.effect_id, c.task_id, c.tool, c.status, c.arguments_json)
        .where(c.run_id == bindparam("run_id"))
        .order_by(c.created_at, c.id)
    )
