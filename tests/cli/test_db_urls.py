"""A database URL given with --db or AGENTCTL_DB is never created as a file or folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest


@pytest.mark.parametrize(
    "url", ["mysql://user@127.0.0.1/agentctl", "http://127.0.0.1/x.db", "file:///tmp/x.db"]
)
def test_an_unsupported_url_scheme_is_refused_naming_the_supported_ones(cli: Any, url: str) -> None:
    result = cli("--output", "json", "db", "migrate", "--db", url)
    assert result.exit_code == 2, result.stdout + result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "store.unsupported_url"
    assert "postgresql://" in error["message"] and "sqlite://" in error["message"]
    assert list(Path.cwd().iterdir()) == []


def test_an_unsupported_url_in_the_environment_is_refused_too(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCTL_DB", "mysql://user@127.0.0.1/agentctl")
    result = cli("--output", "json", "runs", "list")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.error_json()["error"]["code"] == "store.unsupported_url"
    assert list(Path.cwd().iterdir()) == []


def test_a_sqlite_url_names_the_file(cli: Any, tmp_path: Path) -> None:
    target = tmp_path / "via-url.db"
    result = cli("--output", "json", "db", "migrate", "--db", f"sqlite:///{target}")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert target.is_file()
    assert result.json()["data"]["path"] == str(target)
    assert list(Path.cwd().iterdir()) == []


def test_a_postgres_url_without_the_driver_names_the_extra_to_install(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    result = cli("--output", "json", "db", "migrate", "--db", "postgresql://a@127.0.0.1:9/x")
    assert result.exit_code == 5, result.stdout + result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "store.driver_missing" and "agentctl[postgres]" in error["hint"]
    assert list(Path.cwd().iterdir()) == []


def test_a_path_object_still_opens_a_sqlite_file(tmp_path: Path) -> None:
    from agentctl.store.engine import open_store

    with open_store(tmp_path / "p.db") as store:  # type: ignore[arg-type]
        assert store.dialect == "sqlite"
    assert (tmp_path / "p.db").is_file()
