"""`agentctl ui` refusals before it serves, and the dashboard's place in the package."""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "agentctl" / "web"


def test_a_remote_host_needs_allow_remote(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "r.db").write_bytes(b"")
    result = cli("ui", "--db", tmp_path / "r.db", "--host", "0.0.0.0")
    assert result.exit_code == 2
    assert "--host 0.0.0.0 is not a loopback address" in result.stderr
    assert "--allow-remote" in result.stderr


def test_a_missing_database_is_named(cli: Any, tmp_path: Path) -> None:
    result = cli("--output", "json", "ui", "--db", tmp_path / "none.db")
    assert result.exit_code == 5  # as every command that reads the database
    error = result.error_json()["error"]
    assert error["code"] == "store.missing"
    assert error["message"] == f"no agentctl database at {tmp_path / 'none.db'}"
    assert not (tmp_path / "none.db").exists()


def test_help_has_an_example(cli: Any) -> None:
    result = cli("ui", "--help")
    assert result.exit_code == 0
    assert "agentctl ui --db" in result.stdout and "--allow-remote" in result.stdout


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_web_package_imports_starlette_and_jinja() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "agentctl").rglob("*.py")
        if WEB not in path.parents and _imports(path) & {"starlette", "jinja2"}
    ]
    assert offenders == []


def test_help_does_not_load_the_web_stack() -> None:
    probe = (
        "import sys; from agentctl.cli.main import main; main(['--help']); "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'jinja2') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_templates_and_static_files_ship_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["agentctl.web"]
    shipped = [
        path.relative_to(WEB).as_posix()
        for folder in ("templates", "static")
        for path in (WEB / folder).iterdir()
    ]
    assert shipped
    missing = [f for f in shipped if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert missing == []
