"""Workflows by name: `roll NAME`, `workflows list/show`, ambiguity and misses (exit 2)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: {name}
  description: {description}
spec:
  inputs: {{ok: true}}
  actions:
    check: {{kind: builtin.assert}}
  tasks:
    - id: check
      uses: action:check
      with:
        that: "${{{{ inputs.ok }}}}"
"""


def _write(directory: Path, file: str, name: str, description: str = "checks a flag") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file
    path.write_text(textwrap.dedent(WORKFLOW.format(name=name, description=description)))
    return path


def test_roll_by_metadata_name_and_by_stem(cli: Any, tmp_path: Path) -> None:
    _write(Path("workflows"), "nightly.workflow.yaml", "nightly-review")
    db = tmp_path / "r.db"
    by_name = cli("--output", "json", "roll", "nightly-review", "--db", db)
    assert by_name.exit_code == 0, by_name.stderr
    assert by_name.json()["data"]["state"] == "succeeded"
    # The file stem answers too, with and without the ".workflow" part.
    for stem in ("nightly.workflow", "nightly"):
        result = cli("--output", "json", "roll", stem, "--db", db)
        assert result.exit_code == 0, result.stderr
    runs = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"]
    assert {r["workflow"] for r in runs} == {"nightly-review"} and len(runs) == 3


def test_dot_agentctl_workflows_is_searched(cli: Any, tmp_path: Path) -> None:
    _write(Path(".agentctl") / "workflows", "private.yaml", "private")
    result = cli("--output", "json", "roll", "private", "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.stderr


def test_ambiguous_name_exits_2_listing_candidates(cli: Any, tmp_path: Path) -> None:
    first = _write(Path("workflows"), "a.yaml", "review")
    second = _write(Path(".agentctl") / "workflows", "review.yaml", "other")
    result = cli("--output", "json", "roll", "review", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    error = result.error_json()["error"]
    assert error["code"] == "workflow.ambiguous"
    assert str(first.resolve()) in error["message"] and str(second.resolve()) in error["message"]
    assert not (tmp_path / "r.db").exists()  # refused before any database or run existed


def test_miss_lists_near_names(cli: Any, tmp_path: Path) -> None:
    _write(Path("workflows"), "hello.yaml", "hello")
    _write(Path("workflows"), "deploy.yaml", "deploy-prod")
    result = cli("--output", "json", "roll", "helo", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    error = result.error_json()["error"]
    assert error["code"] == "workflow.not_found"
    assert "'helo'" in error["message"] and "hello" in error["hint"]
    assert "deploy" not in error["hint"]


def test_path_arguments_are_not_names(cli: Any, tmp_path: Path) -> None:
    # A missing path keeps the file error; it is never looked up as a name.
    _write(Path("workflows"), "hello.yaml", "hello")
    result = cli("--output", "json", "roll", "hello.yaml", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    assert result.error_json()["error"]["code"] != "workflow.not_found"


def test_env_var_and_config_file_choose_the_directories(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(Path("workflows"), "default.yaml", "from-default")
    _write(Path("ops") / "flows", "configured.yaml", "from-config")
    _write(tmp_path / "elsewhere", "env.yaml", "from-env")
    db = tmp_path / "r.db"
    Path(".agentctl").mkdir(exist_ok=True)
    Path(".agentctl/config.yaml").write_text("workflows:\n  paths: [ops/flows]\n")
    # No run yet, so no database: the default one is not created just to list files.
    listed = cli("--output", "json", "workflows", "list").json()["data"]
    assert [w["name"] for w in listed["workflows"]] == ["from-config"]
    monkeypatch.setenv("AGENTCTL_WORKFLOWS_PATH", str(tmp_path / "elsewhere"))
    listed = cli("--output", "json", "workflows", "list").json()["data"]
    assert [w["name"] for w in listed["workflows"]] == ["from-env"]
    assert cli("roll", "from-env", "--db", db).exit_code == 0
    assert cli("roll", "from-config", "--db", db).exit_code == 2


def test_bad_config_file_names_the_field(cli: Any, tmp_path: Path) -> None:
    Path(".agentctl").mkdir()
    Path(".agentctl/config.yaml").write_text("workflows:\n  paths: flows\n")
    result = cli("--output", "json", "workflows", "list", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    error = result.error_json()["error"]
    assert error["code"] == "config.invalid" and "workflows.paths" in error["message"]


def test_workflows_list_and_show_with_last_run(cli: Any, tmp_path: Path) -> None:
    path = _write(Path("workflows"), "nightly.yaml", "nightly", "the nightly check")
    Path("workflows/broken.yaml").write_text("apiVersion: agentctl.dev/v1\nkind: Workflow\n")
    db = tmp_path / "r.db"
    before = cli("--output", "json", "workflows", "show", "nightly").json()["data"]
    assert before["lastRun"] is None and before["digest"].startswith("sha256:")
    rolled = cli("--output", "json", "roll", "nightly", "--db", db).json()["data"]
    listed = cli("--output", "json", "workflows", "list", "--db", db).json()["data"]["workflows"]
    by_name = {w["name"]: w for w in listed}
    assert set(by_name) == {"nightly", "broken"}
    nightly = by_name["nightly"]
    assert nightly["file"] == str(path.resolve())
    assert nightly["description"] == "the nightly check"
    assert nightly["lastRun"]["runId"] == rolled["runId"]
    assert nightly["lastRun"]["state"] == "succeeded"
    assert by_name["broken"]["problem"].startswith("invalid")
    human = cli("workflows", "show", "nightly", "--db", db)
    assert human.exit_code == 0 and rolled["runId"] in human.stdout
    assert cli("workflows", "show", "nope", "--db", db).exit_code == 2
