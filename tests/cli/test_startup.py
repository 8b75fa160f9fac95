"""Start-up stays cheap: `agentctl --help` imports none of the heavy libraries, `check`
reaches no store, and a command line that names a command builds only that command's
parser, with help, usage and errors exactly as the whole tree gives them.

(How fast start-up is, is measured by bench/startup_bench.py, not asserted here.)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

from agentctl.cli import metavars
from agentctl.cli.app import app, app_for, command_for

REPO = Path(__file__).resolve().parents[2]
TOP_LEVEL = sorted(
    [info.name for info in app.registered_commands if info.name]
    + [info.name for info in app.registered_groups if info.name]
)
HEAVY = ("sqlalchemy", "alembic", "httpx", "asyncio", "ssl", "rich", "pydantic", "jsonschema")
STORE = ("sqlalchemy", "alembic", "httpx", "asyncio", "psycopg", "agentctl.store.engine")
# The executor, the compiler and the migration scripts: only commands that run, compile or
# migrate need them (a store-reading command goes through agentctl.runtime_views).
ENGINE = (
    "agentctl.engine.operations",
    "agentctl.engine.run.executor",
    "agentctl.runtime_records",
    "agentctl.compiler",
    "agentctl.spec",
    "alembic.script",
)


def _parse(application: Any, args: list[str]) -> tuple[str, str]:
    """What the parser built from ``application`` (a typer app, or a click command already
    built) prints for ``args``: (stdout, error)."""
    built = application if hasattr(application, "main") else get_command(application)
    command = metavars.apply(built)
    printed = io.StringIO()
    error = ""
    with contextlib.redirect_stdout(printed):
        try:
            command.main(args=args, prog_name="agentctl", standalone_mode=False)
        except Exception as exc:  # a usage error: compare its text
            error = f"{type(exc).__name__}: {getattr(exc, 'format_message', exc.__str__)()}"
    return printed.getvalue(), error


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_a_named_command_reads_the_same_as_in_the_whole_tree(name: str) -> None:
    for args in ([name, "--help"], [name, "--no-such-option"]):
        pruned = app_for(args)
        assert pruned is not app
        assert [i.name for i in pruned.registered_commands + pruned.registered_groups] == [name]
        assert _parse(pruned, args) == _parse(app, args), args


def test_sub_commands_and_usage_errors_read_the_same() -> None:
    for args in (["runs", "list", "--help"], ["approvals", "approve"], ["check"], ["runs"]):
        assert _parse(app_for(args), args) == _parse(app, args), args


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--help", "roll"], []])
def test_root_help_listed_from_help_texts_reads_as_the_whole_tree(args: list[str]) -> None:
    listed = command_for(args)
    assert all(not c.params for c in listed.commands.values())  # no parser was built
    assert _parse(listed, args) == _parse(app, args)


def test_root_help_and_unknown_names_get_the_whole_tree() -> None:
    for args in ([], ["--help"], ["-h", "roll"], ["--version"], ["chek", "x.yaml"]):
        assert app_for(args) is app, args


def _imported_after(args: list[str], names: tuple[str, ...] = HEAVY + STORE) -> list[str]:
    """Modules of ``names`` loaded by a fresh interpreter running `agentctl ARGS`."""
    probe = (
        "import io, json, sys, contextlib\n"
        "from agentctl.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({args!r})\n"
        f"names = {sorted(set(names))!r}\n"
        "print(json.dumps([code, sorted(m for m in names if m in sys.modules)]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    code, modules = json.loads(result.stdout)
    assert code == 0
    return list(modules)


@pytest.mark.parametrize("args", [["--help"], []], ids=["--help", "bare"])
def test_root_help_imports_no_heavy_library(args: list[str]) -> None:
    assert _imported_after(args) == []


def test_check_reaches_no_store_and_no_network_library() -> None:
    loaded = _imported_after(["check", "workflows/hello.yaml"])
    assert not set(loaded) & set(STORE), loaded
    # Its schemas are plainly valid (compiler/schemas.py), so jsonschema is not loaded.
    assert "jsonschema" not in loaded


def test_version_loads_no_database_library_and_no_migration_script() -> None:
    # The schema revision it prints is the shipped head, read without Alembic.
    assert _imported_after(["--version"], HEAVY + STORE + ENGINE) == []
    # (A named command's parser loads pydantic through typer's conversions.)
    assert _imported_after(["version"], STORE + ENGINE) == []


def test_listing_runs_reads_the_store_without_the_engine_or_the_compiler(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    made = subprocess.run(
        [sys.executable, "-m", "agentctl", "db", "migrate", "--db", db],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    loaded = _imported_after(["runs", "list", "--db", db], ENGINE + ("sqlalchemy",))
    assert loaded == ["sqlalchemy"]  # it did read the store


def test_registering_every_command_imports_no_engine_no_store_and_no_compiler() -> None:
    # The whole tree (what --version, completion and an unknown name build) only names
    # the commands: each imports what it needs when it runs.
    probe = (
        "import json, sys\n"
        "from typer.main import get_command\n"
        "from agentctl.cli.app import app\n"
        "get_command(app)\n"
        f"names = {sorted(set(HEAVY + STORE + ENGINE + ('agentctl.engine',)))!r}\n"
        "print(json.dumps(sorted(m for m in names if m in sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
