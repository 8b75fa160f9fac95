"""Repository statements are built once, compiled once per dialect, and run at the driver
(agentctl/store/statements.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import bindparam, select

from agentctl.store import effects_repo
from agentctl.store.dialect import SqlDialect
from agentctl.store.engine import open_store
from agentctl.store.journal_tables import effects
from agentctl.store.statements import Statement, compile_for, is_compiled, one_of


def _by_status(built: list[str]) -> Statement:
    def build(sql: SqlDialect) -> Any:
        built.append(sql.name)
        c = effects.c
        return (
            select(c.id)
            .where(c.run_id == bindparam("run_id"), one_of(c.status, ("started", "uncertain")))
            .limit(2)
        )

    return Statement(build)


def test_a_statement_is_built_and_compiled_once_per_dialect() -> None:
    built: list[str] = []
    statement = _by_status(built)
    first = statement.compiled("sqlite")
    assert statement.compiled("sqlite") is first
    postgres = statement.compiled("postgresql")
    assert statement.compiled("postgresql") is postgres
    assert built == ["sqlite", "postgresql"]
    assert "?" in first.text and "%s" not in first.text
    assert "%s" in postgres.text and "?" not in postgres.text and "::" not in postgres.text
    assert is_compiled(postgres.text) and not is_compiled(first.text)


def test_constants_are_parameters_with_their_value() -> None:
    compiled = _by_status([]).compiled("postgresql")
    assert compiled.parameters({"run_id": "r1"}) == ("r1", "started", "uncertain", 2)
    with pytest.raises(TypeError, match="'run_id' was not given"):
        compiled.parameters({})


def test_an_in_list_rendered_at_execution_is_refused() -> None:
    with pytest.raises(ValueError, match="one_of"):
        compile_for(select(effects.c.id).where(effects.c.status.in_(["a", "b"])), "sqlite")


def test_statements_run_at_the_driver_on_a_real_file(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.db")) as store:
        with store.driver_session() as session, session.read():
            assert effects_repo.effect(session, "missing") is None
            assert effects_repo.effects(session, "r", task_id="t", statuses=("a", "b")) == []
        with store.read() as conn:  # a SQLAlchemy connection runs the same text
            assert effects_repo.unsettled_effect_ids(conn, "r") == []
        assert effects_repo.unsettled_effect_ids(store.reads_one_by_one()) == []
