"""The CLI skeleton: envelopes, global options, exit codes, help, docs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentctl.cli.reference import iter_commands, render_reference
from agentctl.store import migrate

REPO = Path(__file__).resolve().parents[2]


def test_db_stats_json_envelope(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    assert cli("db", "migrate", "--db", db).exit_code == 0
    result = cli("--output", "json", "db", "stats", "--db", db)
    assert result.exit_code == 0, result.stderr
    document = result.json()  # exactly one JSON document on stdout
    assert document["apiVersion"] == "agentctl.dev/cli/v1"
    assert document["kind"] == "DbStats" and document["ok"] is True
    assert document["data"]["schemaRevision"] == migrate.head_revision()
    assert document["data"]["counts"]["runs"] == 0
    assert document["diagnostics"] == []
    assert result.stderr == ""


def test_output_option_after_the_command_and_group_db(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "y.db"
    assert cli("db", "migrate", "--db", db).exit_code == 0
    result = cli("db", "--db", db, "stats", "--output=jsonl")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["data"]["path"] == str(db)


def test_default_database_location(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = cli("--output", "json", "db", "migrate")
    assert result.json()["data"]["path"] == str(Path.cwd() / ".agentctl" / "runtime.db")
    monkeypatch.setenv("AGENTCTL_DB", str(tmp_path / "env.db"))
    result = cli("--output", "json", "db", "migrate")
    assert result.json()["data"]["path"] == str(tmp_path / "env.db")


def test_usage_error_is_json_on_stderr(cli: Any) -> None:
    result = cli("--output", "json", "db", "stats", "--no-such-flag")
    assert result.exit_code == 2
    assert result.stdout == ""
    error = result.error_json()
    assert error["kind"] == "Error" and error["ok"] is False
    assert error["error"]["exitCode"] == 2 and error["error"]["code"] == "cli.usage"
    assert "--no-such-flag" in error["error"]["message"]


def test_unknown_command_json(cli: Any) -> None:
    result = cli("frobnicate", "--output", "json")
    assert result.exit_code == 2 and result.stdout == ""
    assert "frobnicate" in result.error_json()["error"]["message"]


def test_bad_output_value(cli: Any) -> None:
    result = cli("--output", "yaml", "version")
    assert result.exit_code == 2
    assert "--output" in result.stderr and result.stdout == ""


def test_newer_schema_exit_5_json(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    assert cli("db", "migrate", "--db", db).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'zz99'")
    conn.close()
    before = db.read_bytes()
    for command in (("db", "stats"), ("db", "migrate")):
        result = cli("--output", "json", *command, "--db", db)
        assert result.exit_code == 5
        error = result.error_json()["error"]
        assert "zz99" in error["message"] and migrate.head_revision() in error["message"]
        assert error["code"] == "store.newer_schema" and error["hint"]
        assert result.stdout == ""
    assert db.read_bytes() == before


def test_human_errors_have_no_traceback(cli: Any, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("not a database" * 200)
    result = cli("db", "stats", "--db", junk)
    assert result.exit_code == 5
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert "help:" in result.stderr


def test_db_migrate_reports_change(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    first = cli("--output", "json", "db", "migrate", "--db", db).json()["data"]
    assert first["changed"] is True and first["toRevision"] == migrate.head_revision()
    second = cli("--output", "json", "db", "migrate", "--db", db).json()["data"]
    assert second["changed"] is False
    human = cli("db", "migrate", "--db", db)
    assert "up to date" in human.stdout


def test_human_version_names_the_schema_revision(cli: Any) -> None:
    from agentctl.store.migrate import head_revision

    result = cli("version")
    assert result.exit_code == 0
    assert f"schema revision {head_revision()}" in result.stdout


def test_version_and_verbose(cli: Any) -> None:
    result = cli("version", "-v")
    assert result.stdout.startswith("agentctl 0.1.0")
    assert '"schemaRevision"' in result.stdout


def test_help_in_json_mode_is_one_document(cli: Any) -> None:
    result = cli("--output", "json", "--help")
    assert result.exit_code == 0
    document = result.json()
    assert document["kind"] == "Help" and "db" in document["data"]["text"]


def test_completion_script(cli: Any) -> None:
    result = cli("completion", "bash")
    assert result.exit_code == 0
    assert "complete -o default -F _agentctl_complete agentctl" in result.stdout
    assert cli("completion", "tcsh").exit_code == 2


def test_every_command_has_help_text() -> None:
    missing = [path for path, command, _ in iter_commands() if not (command.help or "").strip()]
    assert missing == []
    for path, command, _ in iter_commands():
        for param in command.params:
            if param.name != "help":
                assert getattr(param, "help", None), f"{path} {param.name} has no help"


def test_cli_reference_is_current() -> None:
    checked_in = (REPO / "docs" / "cli-reference.md").read_text()
    assert checked_in == render_reference(), "run `make docs` to regenerate the reference"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_help_does_not_import_heavy_modules() -> None:
    probe = (
        "import sys\n"
        "from agentctl.cli.main import main\n"
        "code = main(['--help'])\n"
        "heavy = sorted(m for m in ('sqlalchemy', 'alembic', 'httpx') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    result = _run("-c", probe)
    assert result.returncode == 0, result.stderr
    assert "HEAVY=\n" in result.stdout


def test_python_dash_m_and_console_script(tmp_path: Path) -> None:
    result = _run("-m", "agentctl", "--output", "json", "version")
    assert result.returncode == 0
    assert json.loads(result.stdout)["kind"] == "Version"
    script = Path(sys.executable).parent / "agentctl"
    completed = subprocess.run(
        [str(script), "db", "migrate", "--db", str(tmp_path / "c.db"), "--output", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    completed = subprocess.run(
        [str(script), "db", "stats", "--db", str(tmp_path / "c.db"), "--output", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["data"]["counts"]["effects"] == 0


@pytest.mark.slow
def test_wheel_ships_migrations_and_migrates_a_new_database(tmp_path: Path) -> None:
    """``pip install .`` must carry the Alembic revisions inside the package."""
    wheel_dir = tmp_path / "wheel"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheel_dir),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheel_dir.glob("agentctl-*.whl")
    target = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    assert (target / "agentctl" / "_migrations" / "versions" / "0001_initial.py").is_file()
    # Run from the installed copy only: the source tree is not on the path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    probe = (
        "import agentctl.store.migrate as m, sys;"
        f"assert m.migrations_dir().is_relative_to({str(target)!r}), m.migrations_dir();"
        "from agentctl.cli.main import main;"
        f"sys.exit(main(['db', 'migrate', '--db', {str(outside / 'new.db')!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd=outside,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(outside / "new.db") as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        assert row == (migrate.head_revision(),)
    conn.close()


def test_a_newer_database_is_refused_without_new_files(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    assert cli("db", "migrate", "--db", db).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    conn.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert "future.db-wal" not in before
    result = cli("runs", "list", "--db", db)
    assert result.exit_code == 5
    assert "9999_from_the_future" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
