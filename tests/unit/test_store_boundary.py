"""Persistence lives in ``agentctl/store/`` only: an AST walk over the rest of the package.

Outside ``agentctl/store/`` no module may import SQLAlchemy or ``sqlite3`` (also not
through ``importlib``), use ``exec_driver_sql``, call SQLAlchemy's ``text()``, or import
the table objects of ``agentctl.store.tables`` or of the modules that define them
(``agentctl.store.*_tables``, ``agentctl.store.table_base``). Domain packages call the repositories
(``agentctl.store.*_repo``) instead; the CLI reaches them through the domain packages or a
repository function.

``PENDING`` lists the modules still being moved behind repositories, each with the exact
violations it has today. It may only shrink: a module that no longer violates must leave
the list, and nothing new may join it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "agentctl"
STORE = PACKAGE / "store"

_BANNED_MODULES = ("sqlalchemy", "sqlite3")
_TABLES = "agentctl.store.tables"
#: The schema (store/tables.py), its base and the modules that define its tables by concept.
_TABLE_MODULE = re.compile(r"agentctl\.store\.(tables|table_base|\w+_tables)")

#: Engine modules whose record families are still being moved into the store (issue 11).
PENDING: frozenset[str] = frozenset()


def _banned(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in _BANNED_MODULES)


def _is_tables(module: str) -> bool:
    return bool(_TABLE_MODULE.fullmatch(module)) or module.startswith(_TABLES + ".")


def violations(source: str) -> list[str]:
    """Every persistence-boundary violation in one module's source, as ``line: what``."""
    tree = ast.parse(source)
    found: list[str] = []
    sqlalchemy_names: set[str] = set()  # local names bound to sqlalchemy modules
    text_names: set[str] = set()  # local names bound to sqlalchemy's text()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _banned(alias.name):
                    found.append(f"{node.lineno}: import {alias.name}")
                    if alias.name.startswith("sqlalchemy"):
                        sqlalchemy_names.add(alias.asname or alias.name.split(".")[0])
                if _is_tables(alias.name):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            if _banned(node.module):
                found.append(f"{node.lineno}: from {node.module} import ...")
                for alias in node.names:
                    if alias.name == "text":
                        text_names.add(alias.asname or alias.name)
                    else:
                        sqlalchemy_names.add(alias.asname or alias.name)
            if _is_tables(node.module):
                found.append(f"{node.lineno}: table objects from {node.module}")
            elif node.module == "agentctl.store":
                for alias in node.names:
                    if _is_tables(f"{node.module}.{alias.name}"):
                        found.append(
                            f"{node.lineno}: table objects from {node.module}.{alias.name}"
                        )
        elif isinstance(node, ast.Attribute) and node.attr == "exec_driver_sql":
            found.append(f"{node.lineno}: exec_driver_sql")
        elif isinstance(node, ast.Name) and node.id == "exec_driver_sql":
            found.append(f"{node.lineno}: exec_driver_sql")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in text_names:
            found.append(f"{node.lineno}: sqlalchemy text()")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "text"
            and isinstance(func.value, ast.Name)
            and func.value.id in sqlalchemy_names
        ):
            found.append(f"{node.lineno}: sqlalchemy text()")
        elif _dynamic_import(func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                if _banned(first.value) or _is_tables(first.value):
                    found.append(f"{node.lineno}: dynamic import of {first.value}")
    return sorted(set(found), key=lambda item: (int(item.split(":")[0]), item))


def _dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _modules() -> dict[str, list[str]]:
    """``{path relative to the repository: violations}`` for every module outside store/."""
    result: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if STORE in path.parents:
            continue
        relative = path.relative_to(PACKAGE.parent).as_posix()
        result[relative] = violations(path.read_text(encoding="utf-8"))
    return result


def test_no_persistence_outside_the_store() -> None:
    offenders = {path: found for path, found in _modules().items() if found and path not in PENDING}
    assert offenders == {}, (
        "SQL, SQLAlchemy, sqlite3 or table objects outside agentctl/store/; put the "
        f"queries in a repository under agentctl/store/: {offenders}"
    )


def test_pending_modules_still_violate() -> None:
    """A module that was moved behind a repository leaves PENDING (the list only shrinks)."""
    modules = _modules()
    unknown = sorted(path for path in PENDING if path not in modules)
    assert unknown == [], f"PENDING names modules that do not exist: {unknown}"
    clean = sorted(path for path in PENDING if not modules[path])
    assert clean == [], f"these modules no longer violate: remove them from PENDING: {clean}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import sqlite3", ["1: import sqlite3"]),
        (
            "import sqlalchemy as sa\nsa.text('SELECT 1')",
            ["1: import sqlalchemy", "2: sqlalchemy text()"],
        ),
        (
            "from sqlalchemy import text as t\nt('SELECT 1')",
            ["1: from sqlalchemy import ...", "2: sqlalchemy text()"],
        ),
        (
            "if TYPE_CHECKING:\n    from sqlalchemy.engine import Connection",
            ["2: from sqlalchemy.engine import ..."],
        ),
        ("conn.exec_driver_sql('DELETE FROM runs')", ["1: exec_driver_sql"]),
        ("from agentctl.store.tables import runs", ["1: table objects from agentctl.store.tables"]),
        ("from agentctl.store import tables", ["1: table objects from agentctl.store.tables"]),
        ("import agentctl.store.tables", ["1: import agentctl.store.tables"]),
        (
            "from agentctl.store.run_tables import runs",
            ["1: table objects from agentctl.store.run_tables"],
        ),
        (
            "from agentctl.store import journal_tables",
            ["1: table objects from agentctl.store.journal_tables"],
        ),
        ("import agentctl.store.table_base", ["1: import agentctl.store.table_base"]),
        ("importlib.import_module('sqlite3')", ["1: dynamic import of sqlite3"]),
        ("__import__('sqlalchemy.orm')", ["1: dynamic import of sqlalchemy.orm"]),
        # What the domain packages do instead is fine:
        ("from agentctl.store import artifacts_repo\nartifacts_repo.refs(conn)", []),
        ("from agentctl.store.timestamps import to_db\nentry.text('x')", []),
        ("from agentctl.store.formats import FORMAT_VERSION", []),
    ],
)
def test_the_walk_finds_each_kind_of_violation(source: str, expected: list[str]) -> None:
    assert violations(source) == expected
