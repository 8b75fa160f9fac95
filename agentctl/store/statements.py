"""Repository statements: written once with SQLAlchemy Core, compiled once per dialect,
executed at the driver.

A repository declares each statement as a function that builds it from the tables of
the table modules (``store/*_tables.py``) and decorates it with :func:`statement`::

    @statement
    def _effect_by_id(sql: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.journal_tables import effects

        return select(*effects.c).where(effects.c.id == bindparam("effect_id"))

    row = _effect_by_id.run(conn, effect_id=effect_id).first()

The first run on a dialect compiles the statement for it (SQLite's ``?`` placeholders,
psycopg's ``%s``) and keeps the text with its parameters' order; every later run is a dict
lookup, a tuple and the driver's ``execute``, as fast as a hand-written string. Constants
written into the statement (``status == "pending"``) become parameters with their value.
A builder receives the dialect's member of the pair in :mod:`agentctl.store.dialect`
(``sql``) for what the two spell differently (``sql.insert_ignoring(table)``).

The builders import SQLAlchemy inside their bodies: repositories are imported by commands
that never open a store (``agentctl --help``), and start-up must not load SQLAlchemy.

A statement whose shape depends on its arguments (an ``IN`` list of some length, an optional
filter) is one :class:`Statement` per shape: build them in a function cached by the shape
(``functools.lru_cache``), and name each after its arguments (``f"records_of({count})"``).

A fresh process does not build or compile the statements it can find ahead of time: those
with a stable key (:attr:`Statement.key`: the module and the name, or the qualified name of
the builder) that :mod:`agentctl.store.statement_texts` compiled into
``agentctl/store/compiled_sqlite.py`` and ``compiled_postgresql.py`` (``make statements``
writes them; a unit test fails while they differ from what the builders make now). Any
other statement is built and compiled on its first use, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import import_module
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from agentctl.store.dialect import SqlDialect, sql_dialect

if TYPE_CHECKING:
    from sqlalchemy import FromClause
    from sqlalchemy.engine import Dialect
    from sqlalchemy.sql.elements import ColumnElement
    from sqlalchemy.sql.expression import Executable

__all__ = [
    "Compiled",
    "Statement",
    "columns",
    "compile_for",
    "id_list",
    "id_values",
    "is_compiled",
    "one_of",
    "padded",
    "statement",
]


class Compiled:
    """A statement's text for one dialect and its parameters in placeholder order, each
    a name the caller passes or a constant written into the statement."""

    __slots__ = ("_constants", "_pick", "names", "text")

    def __init__(self, text: str, names: tuple[str, ...], constants: dict[str, Any]) -> None:
        self.text = text
        self.names = names
        self._constants = constants
        # One C-level call picks every parameter (this runs on every execution).
        pick = itemgetter(*names) if names else (lambda _values: ())
        self._pick: Callable[[dict[str, Any]], Any] = (
            pick if len(names) != 1 else (lambda values: (pick(values),))
        )

    def parameters(self, values: dict[str, Any]) -> tuple[Any, ...]:
        try:
            return self._pick({**values, **self._constants} if self._constants else values)  # type: ignore[no-any-return]
        except KeyError as exc:
            raise TypeError(f"statement parameter {exc.args[0]!r} was not given") from exc


class Statement:
    """A Core statement compiled once per dialect: taken from the texts compiled ahead of
    time when its key is among them, otherwise built and compiled on first use."""

    __slots__ = ("__name__", "_build", "_compiled", "key")

    def __init__(self, build: Callable[[SqlDialect], Executable], name: str | None = None) -> None:
        self._build = build
        self._compiled: dict[str, Compiled] = {}
        self.__name__ = name or getattr(build, "__name__", "statement")
        #: ``module:name`` (``name`` given, else the builder's qualified name), or None
        #: when that names no one statement (a lambda, a function's local builder).
        self.key = _key(build, name)

    def compiled(self, dialect: str) -> Compiled:
        found = self._compiled.get(dialect)
        if found is None:
            found = _ahead_of_time(dialect, self.key) if self.key is not None else None
            if found is None:
                found = self.compile(dialect)
            self._compiled[dialect] = found
        return found

    def compile(self, dialect: str) -> Compiled:
        """Built and compiled for ``dialect`` now (what the texts compiled ahead hold)."""
        return compile_for(self._build(sql_dialect(dialect)), dialect)

    def run(self, conn: Any, **values: Any) -> Any:
        """Execute on ``conn`` (a SQLAlchemy Connection or a DriverSession) with ``values``
        for its named parameters; the driver's result."""
        name = conn.dialect.name
        compiled = self._compiled.get(name) or self.compiled(name)
        return conn.exec_driver_sql(compiled.text, compiled.parameters(values))

    def run_many(self, conn: Any, rows: Iterable[dict[str, Any]]) -> None:
        """Execute once per row of ``rows`` in one driver call (``executemany``: the text
        is prepared once, whatever the number of rows)."""
        compiled = self.compiled(conn.dialect.name)
        parameters = [compiled.parameters(row) for row in rows]
        if parameters:  # none: nothing to execute (an empty list would run it once)
            conn.exec_driver_sql(compiled.text, parameters)

    def __repr__(self) -> str:
        return f"<statement {self.__name__}>"


def statement(build: Callable[[SqlDialect], Executable]) -> Statement:
    """Decorator: the :class:`Statement` ``build`` makes."""
    return Statement(build)


def _key(build: Callable[..., Any], name: str | None) -> str | None:
    module = getattr(build, "__module__", None)
    label = name or getattr(build, "__qualname__", "")
    if not module or not label or "<" in label:
        return None
    return f"{module}:{label}"


#: A statement's text, parameter names and constants, as ``compiled_<dialect>.py`` hold them.
Entry = tuple[str, tuple[str, ...], dict[str, Any]]

#: The texts compiled ahead of time, per dialect, each module imported on first need.
_AHEAD: dict[str, Mapping[str, Entry]] = {}


def _ahead_of_time(dialect: str, key: str) -> Compiled | None:
    table = _AHEAD.get(dialect)
    if table is None:
        table = _AHEAD[dialect] = import_module(f"agentctl.store.compiled_{dialect}").STATEMENTS
    entry = table.get(key)
    if entry is None:
        return None
    text, names, constants = entry
    if dialect == "postgresql":
        _POSTGRES_TEXTS.add(text)
    return Compiled(text, names, constants)


#: Every text compiled for PostgreSQL: psycopg reads their placeholders even with no
#: parameters (a ``%`` is written ``%%``), unlike a plain text such as a ``BEGIN``.
_POSTGRES_TEXTS: set[str] = set()

#: The SQLAlchemy dialect each pair member compiles with, made once.
_COMPILERS: dict[str, Dialect] = {}


def compile_for(clause: Executable, dialect: str) -> Compiled:
    """``clause`` compiled for ``dialect`` (``sqlite`` or ``postgresql``)."""
    compiler = _COMPILERS.get(dialect)
    if compiler is None:
        compiler = _COMPILERS[dialect] = sql_dialect(dialect).compiler()
    compiled: Any = clause.compile(dialect=compiler)  # type: ignore[attr-defined]
    text = str(compiled)
    if "POSTCOMPILE" in text:
        # SQLAlchemy renders an ``IN`` list at each execution; a compiled-once text cannot.
        raise ValueError(
            f"{text!r}: write an IN list with one_of(column, values) or one bindparam per value"
        )
    names = tuple(compiled.positiontup or ())
    binds = compiled.binds
    constants = {name: binds[name].value for name in names if not binds[name].required}
    if dialect == "postgresql":
        _POSTGRES_TEXTS.add(text)
    return Compiled(text, names, constants)


def is_compiled(text: str) -> bool:
    """Whether ``text`` is a statement compiled here for PostgreSQL."""
    return text in _POSTGRES_TEXTS


def columns(table: FromClause, names: Sequence[str]) -> list[ColumnElement[Any]]:
    """``table``'s (or an alias's) columns named ``names``, in that order (a repository's
    column list)."""
    return [table.c[name] for name in names]


def one_of(column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
    """``column IN (values…)`` with one placeholder per constant, fixed at compile time."""
    from sqlalchemy import literal

    return column.in_([literal(value) for value in values])


def padded(values: Sequence[Any]) -> list[Any]:
    """``values`` (not empty) lengthened to the next power of two by repeating the last:
    for an ``IN`` list, where a repeated value changes nothing, so a list of any length
    takes one of a few statements (compiled once each) instead of one per length."""
    size = 1 << (len(values) - 1).bit_length()
    return [*values, *([values[-1]] * (size - len(values)))]


def id_list(column: ColumnElement[Any], count: int, name: str = "id") -> ColumnElement[bool]:
    """``column IN (:id_0, …, :id_{count-1})``: a list of values that :func:`id_values`
    names (a statement compiled once per ``count``; see :func:`padded`). ``name`` tells two
    lists of one statement apart."""
    from sqlalchemy import bindparam

    return column.in_([bindparam(f"{name}_{n}") for n in range(count)])


def id_values(ids: Sequence[Any], name: str = "id") -> dict[str, Any]:
    """The parameters of :func:`id_list` for ``ids``, in order."""
    return {f"{name}_{n}": value for n, value in enumerate(ids)}
