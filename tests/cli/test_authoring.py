"""check, plan and schema through the CLI, on our workflows and the reference examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(REPO / "workflows").glob("*.yaml"),
        *(REPO / "tests" / "fixtures" / "reference").glob("*.yaml"),
        *(REPO / "workflows" / "python").glob("*.*"),
    ]
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_check_and_plan_every_workflow(cli: Any, path: Path) -> None:
    checked = cli("--output", "json", "check", path)
    assert checked.exit_code == 0, checked.stderr
    data = checked.json()["data"]
    assert data["valid"] is True and data["planDigest"].startswith("sha256:")
    planned = cli("--output", "json", "plan", path)
    assert planned.exit_code == 0
    plan = planned.json()["data"]
    assert plan["planDigest"] == data["planDigest"] and len(plan["order"]) == data["tasks"]


def test_yaml_and_python_definitions_have_the_same_plan_digest(cli: Any) -> None:
    yaml_digest = cli(
        "--output", "json", "check", REPO / "workflows" / "python" / "review_pipeline.yaml"
    ).json()["data"]
    python_digest = cli(
        "--output", "json", "check", REPO / "workflows" / "python" / "review_pipeline.py"
    ).json()["data"]
    assert yaml_digest["planDigest"] == python_digest["planDigest"]
    assert yaml_digest["workflowDigest"] == python_digest["workflowDigest"]


def test_plan_human_tree_and_graphs(cli: Any) -> None:
    path = REPO / "tests" / "fixtures" / "reference" / "25_3.yaml"
    human = cli("plan", path)
    assert human.exit_code == 0
    assert "maxConcurrency 4" in human.stdout and "pick  [router]" in human.stdout
    mermaid = cli("plan", path, "--graph", "mermaid").stdout
    assert mermaid.startswith("flowchart TD") and "-->" in mermaid
    dot = cli("plan", path, "--graph", "dot").stdout
    assert dot.startswith('digraph "build-matrix-and-gate"') and "->" in dot
    bad = cli("plan", path, "--graph", "svg")
    assert bad.exit_code == 2


def test_invalid_workflow_exits_2_with_located_diagnostics(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: x}\nspec:\n"
        "  agents:\n    a: {provider: p, model: m, instructions: hi,\n"
        "        reasoning: {effort: high}}\n"
        "  providers:\n    p: {kind: fake}\n"
        "  tasks:\n    - {id: t, uses: 'agent:a'}\n"
    )
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2 and result.stdout == ""
    (diagnostic,) = result.error_json()["diagnostics"]
    assert diagnostic["code"] == "unsupported_capability"
    assert diagnostic["file"] == str(path) and diagnostic["line"] >= 6
    human = cli("check", path)
    assert "unsupported_capability" in human.stderr and "help:" in human.stderr


def test_old_api_version_gets_the_upstream_diagnostic(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(
        "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: x}\n"
        "spec: {tasks: [{id: a, uses: 'action:x'}]}\n"
    )
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2
    (diagnostic,) = result.error_json()["diagnostics"]
    assert diagnostic["code"] == "unsupported_version" and diagnostic["line"] == 1
    assert "agentctl.dev/v1" in diagnostic["help"]


def test_schema_prints_and_writes_and_validates_examples(cli: Any, tmp_path: Path) -> None:
    printed = cli("schema")
    schema = json.loads(printed.stdout)
    target = tmp_path / "nested" / "workflow.schema.json"
    written = cli("--output", "json", "schema", "--write", target)
    assert written.exit_code == 0 and json.loads(target.read_text()) == schema
    import yaml

    document = yaml.safe_load((REPO / "tests/fixtures/reference/25_1.yaml").read_text())
    jsonschema.validate(document, schema)
    document["spec"]["bogus"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


def test_check_missing_file_and_bad_workspace(cli: Any, tmp_path: Path) -> None:
    missing = cli("--output", "json", "check", tmp_path / "nope.yaml")
    assert missing.exit_code == 2
    assert "nope.yaml" in json.dumps(missing.error_json())
    path = REPO / "workflows" / "hello.yaml"
    assert cli("check", path, "--workspace", tmp_path / "absent").exit_code == 2


def test_snake_case_field_is_refused_with_the_camel_case_name(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "snake.yaml"
    path.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: x}\nspec:\n"
        "  actions: {set: {kind: builtin.assign}}\n"
        "  tasks:\n    - id: a\n      uses: action:set\n      timeout_seconds: 5\n"
    )
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2 and result.stdout == ""
    (diagnostic,) = result.error_json()["diagnostics"]
    # Upstream's code set: an unknown key is a schema_violation, the message says which.
    assert diagnostic["code"] == "schema_violation"
    assert diagnostic["message"].startswith("unknown field `timeout_seconds` at spec.tasks[0]")
    assert diagnostic["path"] == "spec.tasks[0].timeout_seconds"
    assert (diagnostic["file"], diagnostic["line"], diagnostic["column"]) == (str(path), 9, 7)
    assert diagnostic["help"] == "rename `timeout_seconds` to `timeoutSeconds`"
    human = cli("check", path)
    assert human.exit_code == 2 and "spells it `timeoutSeconds`" in human.stderr


def _fan_out(tmp_path: Path, items: int, max_items: int, limits: str) -> Path:
    path = tmp_path / "fan.yaml"
    path.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: fan}\nspec:\n"
        f"  runtime: {{{limits}}}\n"
        "  actions: {set: {kind: builtin.assign}}\n"
        "  tasks:\n"
        "    - id: fan\n      uses: action:set\n"
        f"      foreach: {{items: {json.dumps(list(range(items)))}, maxItems: {max_items}}}\n"
        "      with: {n: '${{ vars.item }}'}\n"
    )
    return path


def test_ten_thousand_item_fan_out_fits_once_runtime_limits_raise_the_cap(
    cli: Any, tmp_path: Path
) -> None:
    # Without runtime.limits the upstream cap (maxItems at most 256) still applies.
    refused = cli("--output", "json", "check", _fan_out(tmp_path, 10_000, 10_000, ""))
    assert refused.exit_code == 2
    (diagnostic,) = refused.error_json()["diagnostics"]
    assert (diagnostic["code"], diagnostic["path"], diagnostic["line"]) == (
        "schema_violation",
        "spec.tasks[0].foreach.maxItems",
        10,
    )
    assert "maxItemsPerExpansion" in diagnostic["help"]
    raised = _fan_out(tmp_path, 10_000, 10_000, "limits: {maxItemsPerExpansion: 10000}")
    checked = cli("--output", "json", "check", raised)
    assert checked.exit_code == 0, checked.stderr
    assert checked.json()["data"]["tasks"] == 10_001  # the children and their aggregate
    beyond = _fan_out(tmp_path, 3, 3, "limits: {maxItemsPerExpansion: 100001}")
    over = cli("--output", "json", "check", beyond)
    assert over.exit_code == 2
    (ceiling,) = over.error_json()["diagnostics"]
    assert ceiling["path"] == "spec.runtime.limits.maxItemsPerExpansion"
    assert "between 1 and 100000" in ceiling["message"]


def test_check_and_plan_verify_paths_in_the_workspace(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "paths.yaml"
    path.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: paths}\nspec:\n"
        "  policy: {processAllowlist: [make]}\n"
        "  providers: {p: {kind: fake}}\n"
        "  agents: {a: {provider: p, model: m, instructionsFile: prompts/a.md}}\n"
        "  actions:\n"
        "    build: {kind: builtin.shell.exec, command: make, cwd: src}\n"
        "  tasks:\n    - {id: b, uses: 'action:build'}\n    - {id: t, uses: 'agent:a'}\n"
    )
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    missing = cli("--output", "json", "check", path, "--workspace", checkout)
    assert missing.exit_code == 2
    found = [(d["code"], d["path"], d["line"]) for d in missing.error_json()["diagnostics"]]
    assert found == [
        ("missing_reference", "spec.actions.build.cwd", 9),
        ("missing_reference", "spec.agents.a.instructionsFile", 7),
    ]
    planned = cli("--output", "json", "plan", path, "--workspace", checkout)
    assert planned.exit_code == 2
    explained = cli("--output", "json", "explain", path, "--workspace", checkout)
    assert explained.exit_code == 2
    assert [d["path"] for d in explained.error_json()["diagnostics"]] == [p for _, p, _ in found]
    (checkout / "src").mkdir()
    (checkout / "prompts").mkdir()
    (checkout / "prompts" / "a.md").write_text("be brief\n")
    checked = cli("--output", "json", "check", path, "--workspace", checkout)
    assert checked.exit_code == 0, checked.stderr
    assert checked.json()["data"]["workspace"] == str(checkout.resolve())
    planned = cli("--output", "json", "plan", path, "--workspace", checkout)
    assert planned.exit_code == 0, planned.stderr
    explained = cli("--output", "json", "explain", path, "--workspace", checkout)
    assert explained.exit_code == 0, explained.stderr
    assert explained.json()["data"]["workspace"] == str(checkout.resolve())
    assert cli("explain", path, "--workspace", tmp_path / "absent").exit_code == 2
    assert planned.json()["data"]["workspace"] == str(checkout.resolve())
    # Without --workspace nothing on disk is consulted, as before.
    assert cli("check", path).exit_code == 0
    escaping = path.read_text().replace("cwd: src", "cwd: ../elsewhere")
    path.write_text(escaping)
    (tmp_path / "elsewhere").mkdir()
    denied = cli("--output", "json", "check", path, "--workspace", checkout)
    (diagnostic,) = denied.error_json()["diagnostics"]
    assert (diagnostic["code"], diagnostic["path"]) == ("policy_denied", "spec.actions.build.cwd")
    bad = cli("--output", "json", "plan", path, "--workspace", tmp_path / "nope")
    assert bad.exit_code == 2 and "not a directory" in bad.error_json()["error"]["message"]
