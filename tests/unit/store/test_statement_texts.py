"""The statements compiled ahead of time (agentctl/store/compiled_*.py, written by
``make statements``) are what the builders make now, and a fresh process takes them from
there instead of building and compiling (agentctl/store/statement_texts.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentctl.store import statement_texts
from agentctl.store.statements import Statement, is_compiled


@pytest.mark.parametrize("dialect", statement_texts.DIALECTS)
def test_the_committed_module_is_what_the_builders_make_now(dialect: str) -> None:
    path = statement_texts.module_path(dialect)
    assert path.read_text(encoding="utf-8") == statement_texts.render(dialect), (
        f"{path.name} is stale: a statement's builder changed; run `make statements` "
        "(python -m agentctl.store.statement_texts) and commit the result"
    )


def test_every_top_level_statement_and_the_listed_shapes_are_keyed_once() -> None:
    keyed = statement_texts.keyed_statements()
    assert "agentctl.store.checkpoints_repo:_since" in keyed
    assert "agentctl.store.runs_repo:of_run('cancel_requested', 'cancel_reason')" in keyed
    assert "agentctl.store.plan_repo:records_of(1)" in keyed
    assert "agentctl.store.tasks_repo:states_of_tasks(16)" in keyed
    assert len({id(statement) for statement in keyed.values()}) == len(keyed)


@pytest.mark.parametrize("dialect", statement_texts.DIALECTS)
def test_a_text_compiled_ahead_runs_as_the_one_compiled_now(dialect: str) -> None:
    for key, statement in statement_texts.keyed_statements().items():
        fresh = Statement(statement._build, statement.__name__)
        ahead = fresh.compiled(dialect)
        now = statement.compile(dialect)
        assert (ahead.text, ahead.names) == (now.text, now.names), key
        values = {name: f"v-{name}" for name in now.names}
        assert ahead.parameters(values) == now.parameters(values), key
        if dialect == "postgresql":  # psycopg reads its placeholders (the %% rule)
            assert is_compiled(ahead.text), key


def test_a_keyed_statement_is_not_built_and_an_unkeyed_one_is() -> None:
    from agentctl.store import checkpoints_repo

    built: list[str] = []

    def build(sql: object) -> object:
        built.append("built")
        return checkpoints_repo._since._build(sql)  # type: ignore[arg-type]

    keyed = Statement(build, "x")
    keyed.key = checkpoints_repo._since.key
    assert keyed.compiled("sqlite").text == checkpoints_repo._since.compile("sqlite").text
    assert built == []
    unkeyed = Statement(build)
    assert unkeyed.key is None  # a function's local builder names no one statement
    assert unkeyed.compiled("sqlite").text == keyed.compiled("sqlite").text
    assert built == ["built"]


def test_a_fresh_process_takes_a_resume_s_statements_without_compiling() -> None:
    script = (
        "import sys\n"
        "from agentctl.store import checkpoints_repo, plan_repo, tasks_repo\n"
        "for s in (checkpoints_repo._since, plan_repo._records_of(2),\n"
        "          tasks_repo._states_of_tasks(4), tasks_repo._outputs_in_order):\n"
        "    for d in ('sqlite', 'postgresql'):\n"
        "        s.compiled(d)\n"
        "print('sqlalchemy.sql.compiler' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
