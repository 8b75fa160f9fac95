"""Variables through the CLI: the eight layers, whole-value replacement, refusals located at
their file and line (or flag), `explain`, and runs that keep the values they were made with."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: layered
spec:
  varsFiles: [vars/workflow.yaml]
  vars:
    v2: 2
    v3: 2
    v4: 2
    v5: 2
    v6: 2
    v7: 2
    v8: 2
  providers:
    scripted: { kind: fake }
  agents:
    writer:
      provider: scripted
      model: fake-1
      instructions: write
      varsFiles: [vars/agent.yaml]
      vars:
        v4: 4
        v5: 4
        v6: 4
        v7: 4
        v8: 4
  actions:
    set: { kind: builtin.assign }
  tasks:
    - id: draft
      uses: agent:writer
      varsFiles: [vars/task.yaml]
      vars:
        v6: 6
        v7: 6
        v8: 6
    - id: tally
      uses: action:set
      with:
        v1: "${{ vars.v1 }}"
        v2: "${{ vars.v2 }}"
        v7: "${{ vars.v7 }}"
"""


def _layered(tmp_path: Path) -> Path:
    folder = tmp_path / "flow"
    (folder / "vars").mkdir(parents=True)
    (folder / "vars" / "workflow.yaml").write_text(
        "".join(f"v{i}: 1\n" for i in range(1, 9)), encoding="utf-8"
    )
    (folder / "vars" / "agent.yaml").write_text(
        "".join(f"v{i}: 3\n" for i in range(3, 9)), encoding="utf-8"
    )
    (folder / "vars" / "task.yaml").write_text(
        "".join(f"v{i}: 5\n" for i in range(5, 9)), encoding="utf-8"
    )
    (tmp_path / "invocation.yaml").write_text("v7: 7\nv8: 7\n", encoding="utf-8")
    path = folder / "workflow.yaml"
    path.write_text(WORKFLOW, encoding="utf-8")
    return path


def _line(path: Path, text: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_eight_layers_each_win_over_the_ones_below(cli: Any, tmp_path: Path) -> None:
    path = _layered(tmp_path)
    os.chdir(tmp_path)
    flags = ["--vars-file", "invocation.yaml", "--var", "v8=8"]
    planned = cli("--output", "json", "plan", path, *flags)
    assert planned.exit_code == 0, planned.stderr
    tasks = planned.json()["data"]["tasks"]
    # v<i> is first written at layer 1 and then by every layer up to i: layer i wins.
    assert tasks["draft"]["vars"] == {f"v{i}": i for i in range(1, 9)}
    # An action task has no agent layers: layer 3/4 values never reach it.
    assert tasks["tally"]["vars"] == {
        "v1": 1,
        "v2": 2,
        "v3": 2,
        "v4": 2,
        "v5": 2,
        "v6": 2,
        "v7": 7,
        "v8": 8,
    }
    explained = cli("--output", "json", "explain", path, *flags)
    assert explained.exit_code == 0, explained.stderr
    data = explained.json()["data"]
    assert data["planDigest"] == planned.json()["data"]["planDigest"]
    draft = {
        v["name"]: v for v in next(s for s in data["tasks"] if s["task"] == "draft")["variables"]
    }
    layers = [draft[f"v{i}"]["source"]["layer"] for i in range(1, 9)]
    assert layers == [
        "spec.varsFiles",
        "spec.vars",
        "agent.varsFiles",
        "agent.vars",
        "task.varsFiles",
        "task.vars",
        "--vars-file",
        "--var",
    ]
    # Every source says where it is: file and line, or the flag as given.
    assert draft["v1"]["source"]["file"].endswith(os.path.join("vars", "workflow.yaml"))
    assert draft["v1"]["source"]["line"] == 1
    assert draft["v4"]["source"]["file"] == str(path)
    assert draft["v4"]["source"]["line"] == _line(path, "v4: 4")
    assert draft["v6"]["source"]["line"] == _line(path, "v6: 6")
    assert draft["v7"]["source"] == {
        "layer": "--vars-file",
        "file": "invocation.yaml",
        "line": 1,
        "column": 1,
        "path": "v7",
    }
    assert draft["v8"]["source"] == {"layer": "--var", "flag": "--var v8=8"}
    # What each winner replaced, nearest first.
    assert [r["value"] for r in draft["v8"]["replaced"]] == [7, 6, 5, 4, 3, 2, 1]
    human = cli("explain", path, *flags)
    assert human.exit_code == 0
    assert "v8 = 8  from --var v8=8; replaces 7 from invocation.yaml:2:1 (--vars-file)" in (
        human.stdout
    )


def test_later_flags_and_files_win_within_a_layer_and_flags_beat_files(
    cli: Any, tmp_path: Path
) -> None:
    path = _layered(tmp_path)
    (tmp_path / "second.yaml").write_text("v7: 70\n", encoding="utf-8")
    os.chdir(tmp_path)
    planned = cli(
        "--output",
        "json",
        "plan",
        path,
        "--var",
        "v8=80",
        "--vars-file",
        "invocation.yaml",
        "--var",
        "v8=81",
        "--vars-file",
        "second.yaml",
    )
    assert planned.exit_code == 0, planned.stderr
    variables = planned.json()["data"]["tasks"]["tally"]["vars"]
    assert variables["v8"] == 81 and variables["v7"] == 70


def _simple(tmp_path: Path, body: str, files: dict[str, str] | None = None) -> Path:
    for name, text in (files or {}).items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    path = tmp_path / "wf.yaml"
    path.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: { name: simple }\nspec:\n" + body,
        encoding="utf-8",
    )
    return path


REPORT = """\
  actions:
    set: { kind: builtin.assign }
  tasks:
    - id: report
      uses: action:set
      with:
        settings: "${{ vars.settings }}"
        tags: "${{ vars.tags }}"
        replicas: "${{ vars.replicas }}"
  outputs:
    report: "${{ tasks.report.output.output }}"
"""


def test_a_higher_layer_replaces_objects_and_lists_whole(cli: Any, tmp_path: Path) -> None:
    path = _simple(
        tmp_path,
        "  varsFiles: [base.yaml]\n" + REPORT,
        {"base.yaml": "settings: {region: eu, size: large}\ntags: [a, b]\nreplicas: 2\n"},
    )
    rolled = cli(
        "--output",
        "json",
        "roll",
        path,
        "--db",
        tmp_path / "s.db",
        "--var",
        'settings={"size": "small"}',
        "--var",
        'tags=["c"]',
    )
    assert rolled.exit_code == 0, rolled.stderr
    assert rolled.json()["data"]["output"]["report"] == {
        "settings": {"size": "small"},
        "tags": ["c"],
        "replicas": 2,
    }


def _errors(result: Any) -> list[dict[str, Any]]:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    return list(result.error_json()["diagnostics"])


def test_reserved_names_are_refused_at_every_layer_with_their_location(
    cli: Any, tmp_path: Path
) -> None:
    path = _simple(
        tmp_path,
        "  varsFiles: [base.yaml]\n  vars:\n    matrix: 1\n"
        + REPORT.replace(
            "      uses: action:set\n", "      uses: action:set\n      vars: { loopIndex: 0 }\n"
        ),
        {"base.yaml": "replicas: 1\nforeachIndex: 2\n"},
    )
    found = _errors(
        cli("--output", "json", "check", path, "--var", "matrixIndex=3", "--var", "replicas=1")
    )
    by_path = {d["path"]: d for d in found}
    assert set(by_path) == {
        "foreachIndex",
        "--var matrixIndex=3",
        "spec.vars.matrix",
        "spec.tasks[0].vars.loopIndex",
    }
    assert all(d["code"] == "schema_violation" for d in found)
    assert by_path["foreachIndex"]["file"] == str(tmp_path / "base.yaml")
    assert by_path["foreachIndex"]["line"] == 2
    assert by_path["spec.vars.matrix"]["line"] == _line(path, "matrix: 1")
    assert by_path["spec.tasks[0].vars.loopIndex"]["line"] == _line(path, "loopIndex")
    assert by_path["--var matrixIndex=3"]["file"] == "<command line>"
    assert "reserved variable `matrixIndex`" in by_path["--var matrixIndex=3"]["message"]


@pytest.mark.parametrize(
    ("text", "code", "line", "needle"),
    [
        ("include: [other.yaml]\n", "schema_violation", 1, "cannot include other files"),
        ("a: 1\nmsg: 'hi ${{ inputs.x }}'\n", "invalid_template", 2, "are data"),
        ("- a\n- b\n", "schema_violation", 1, "must hold a mapping"),
        ("a: 1\na: 2\n", "yaml_syntax", 2, "duplicate"),
    ],
    ids=["include", "template", "list", "duplicate-key"],
)
def test_bad_variables_files_are_located(
    cli: Any, tmp_path: Path, text: str, code: str, line: int, needle: str
) -> None:
    path = _simple(tmp_path, "  varsFiles: [base.yaml]\n" + REPORT, {"base.yaml": text})
    found = _errors(cli("--output", "json", "check", path))
    assert [d["code"] for d in found] == [code]
    assert found[0]["file"] == str(tmp_path / "base.yaml")
    assert found[0]["line"] == line
    assert needle in found[0]["message"]


def test_missing_escaping_and_climbing_files_are_refused_at_the_workflow_line(
    cli: Any, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text("replicas: 1\n", encoding="utf-8")
    (tmp_path / "link.yaml").symlink_to(outside)
    path = _simple(tmp_path, "  varsFiles: [missing.yaml, link.yaml]\n" + REPORT)
    found = _errors(cli("--output", "json", "check", path))
    assert [d["path"] for d in found] == ["spec.varsFiles[0]", "spec.varsFiles[1]"]
    assert "cannot read variables file missing.yaml" in found[0]["message"]
    assert "outside the workflow's directory" in found[1]["message"]
    assert all(d["file"] == str(path) and d["line"] == _line(path, "varsFiles") for d in found)
    climbing = _simple(tmp_path, "  varsFiles: [../x.yaml]\n" + REPORT)
    found = _errors(cli("--output", "json", "check", climbing))
    assert found[0]["code"] == "schema_violation" and found[0]["path"] == "spec.varsFiles[0]"
    assert "`..`" in found[0]["message"]


def test_var_needs_valid_json(cli: Any, tmp_path: Path) -> None:
    path = _simple(tmp_path, REPORT)
    found = _errors(cli("--output", "json", "check", path, "--var", "replicas=three"))
    assert found[0]["path"] == "--var replicas=three"
    assert found[0]["help"] == "quote a string as JSON: --var 'replicas=\"three\"'"
    found = _errors(cli("--output", "json", "roll", path, "--var", "noequals"))
    assert "is not KEY=JSON" in found[0]["message"]
    assert not (tmp_path / "work" / ".agentctl").exists()


def test_values_from_files_and_flags_count_in_both_digests(cli: Any, tmp_path: Path) -> None:
    path = _simple(tmp_path, "  varsFiles: [base.yaml]\n" + REPORT, {"base.yaml": "replicas: 1\n"})

    def digests(*flags: str) -> tuple[str, str]:
        data = cli("--output", "json", "check", path, *flags).json()["data"]
        return data["workflowDigest"], data["planDigest"]

    first = digests("--var", "settings={}", "--var", "tags=[]")
    assert digests("--var", "settings={}", "--var", "tags=[]") == first
    (tmp_path / "base.yaml").write_text("replicas: 2\n", encoding="utf-8")
    changed_file = digests("--var", "settings={}", "--var", "tags=[]")
    assert changed_file[0] != first[0] and changed_file[1] != first[1]
    changed_flag = digests("--var", "settings={}", "--var", "tags=[1]")
    assert changed_flag[0] != changed_file[0] and changed_flag[1] != changed_file[1]
    # The same value from a file or a flag is the same workflow.
    (tmp_path / "inv.yaml").write_text("settings: {}\ntags: [1]\n", encoding="utf-8")
    assert digests("--vars-file", str(tmp_path / "inv.yaml")) == changed_flag


def test_a_workflow_without_new_variables_keeps_its_digest(cli: Any, tmp_path: Path) -> None:
    body = REPORT.replace(
        "      with:\n", "      vars: { replicas: 1, tags: [], settings: {} }\n      with:\n"
    )
    path = _simple(tmp_path, body)
    data = cli("--output", "json", "check", path).json()["data"]
    from agentctl.compiler import compile_document
    from agentctl.spec import load_workflow

    loaded = load_workflow(path)
    assert loaded.document is not None
    dumped = loaded.document.model_dump(mode="json", by_alias=True, exclude_unset=True)
    plan = compile_document(dumped).plan
    assert plan is not None and plan.variables is None
    assert (plan.workflow_digest, plan.plan_digest) == (data["workflowDigest"], data["planDigest"])


def test_runs_keep_their_variables_for_resume_replay_retry_and_repair(
    cli: Any, tmp_path: Path
) -> None:
    path = _simple(tmp_path, "  varsFiles: [base.yaml]\n" + REPORT, {"base.yaml": "replicas: 1\n"})
    db = tmp_path / "s.db"
    flags = ["--var", 'settings={"size": "xl"}', "--var", 'tags=["t"]']
    rolled = cli("--output", "json", "roll", path, "--db", db, *flags)
    assert rolled.exit_code == 0, rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    expected = {"settings": {"size": "xl"}, "tags": ["t"], "replicas": 1}
    assert rolled.json()["data"]["output"]["report"] == expected

    inspected = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]["run"]
    assert inspected["variables"] == {
        "values": {"settings": {"size": "xl"}, "tags": ["t"]},
        "sources": {
            "settings": {"layer": "--var", "flag": '--var settings={"size": "xl"}'},
            "tags": {"layer": "--var", "flag": '--var tags=["t"]'},
        },
    }
    replayed = cli("--output", "json", "replay", run_id, "--db", db)
    assert replayed.exit_code == 0, replayed.stderr
    assert replayed.json()["data"]["output"]["report"] == expected

    # retry takes no --var: it compiles with the values the source run recorded.
    retried = cli("--output", "json", "retry", path, run_id, "--from", "report", "--db", db)
    assert retried.exit_code == 0, retried.stderr
    assert retried.json()["data"]["output"]["report"] == expected

    # A changed variables file is a changed workflow: retry refuses, repair runs it.
    (tmp_path / "base.yaml").write_text("replicas: 3\n", encoding="utf-8")
    refused = cli("--output", "json", "retry", path, run_id, "--from", "report", "--db", db)
    assert refused.exit_code == 3
    assert refused.error_json()["error"]["code"] == "retry.workflow_changed"
    repaired = cli("--output", "json", "repair", path, run_id, "--from", "report", "--db", db)
    assert repaired.exit_code == 0, repaired.stderr
    assert repaired.json()["data"]["output"]["report"] == {**expected, "replicas": 3}
    # repair --var replaces the recorded invocation values.
    changed = cli(
        "--output", "json", "repair", path, run_id, "--from", "report", "--db", db,
        "--var", "settings=null", "--var", "tags=[]",
    )  # fmt: skip
    assert changed.exit_code == 0, changed.stderr
    assert changed.json()["data"]["output"]["report"] == {
        "settings": None,
        "tags": [],
        "replicas": 3,
    }


def test_explain_refuses_a_workflow_that_does_not_compile(cli: Any, tmp_path: Path) -> None:
    path = _simple(tmp_path, "  vars: { msg: 'for ${{ inputs.x }}' }\n" + REPORT)
    found = _errors(cli("--output", "json", "explain", path))
    assert [(d["code"], d["path"]) for d in found] == [("invalid_template", "spec.vars.msg")]
    assert found[0]["line"] == _line(path, "vars:")
    path = _simple(tmp_path, REPORT)
    ok = cli("--output", "json", "explain", path, "--var", "settings=1", "--var", "tags=2",
             "--var", "replicas=3")  # fmt: skip
    assert ok.exit_code == 0
    names = [v["name"] for v in ok.json()["data"]["variables"]]
    assert names == ["replicas", "settings", "tags"]
    assert json.dumps(ok.json()["data"]["tasks"][0]["variables"][0]["value"]) == "3"


def test_sub_workflow_children_and_fan_out_children_get_the_layers(
    cli: Any, tmp_path: Path
) -> None:
    path = _simple(
        tmp_path,
        """\
  vars: { region: eu, item: shadowed }
  actions:
    set: { kind: builtin.assign }
  subworkflows:
    stamp:
      version: 1.0.0
      inputSchema: { type: object }
      outputSchema: { type: object }
      outputs: { stamped: "${{ tasks.mark.output.output }}" }
      tasks:
        - id: mark
          uses: action:set
          varsFiles: [mark.yaml]
          with: { region: "${{ vars.region }}", label: "${{ vars.label }}" }
  tasks:
    - id: fan
      uses: action:set
      foreach: { items: [x, y] }
      with: { item: "${{ vars.item }}", region: "${{ vars.region }}" }
    - id: call
      uses: workflow:stamp
""",
        {"mark.yaml": "label: from-file\n"},
    )
    planned = cli("--output", "json", "plan", path, "--var", 'region="us"')
    assert planned.exit_code == 0, planned.stderr
    tasks = planned.json()["data"]["tasks"]
    children = [t for t in tasks.values() if (t.get("expansion") or {}).get("parent") == "fan"]
    # The foreach binding wins over a variable of the same name; --var wins over spec.vars.
    assert [c["vars"]["item"] for c in children] == ["x", "y"]
    assert all(c["vars"]["region"] == "us" for c in children)
    assert tasks["call--mark"]["vars"] == {"region": "us", "item": "shadowed", "label": "from-file"}
    explained = cli("--output", "json", "explain", path).json()["data"]
    mark = next(s for s in explained["tasks"] if s["task"] == "mark")
    assert mark["path"] == "spec.subworkflows.stamp.tasks[0]"
    label = next(v for v in mark["variables"] if v["name"] == "label")
    assert label["source"]["layer"] == "task.varsFiles" and label["source"]["line"] == 1


def test_explain_through_a_real_process(tmp_path: Path) -> None:
    from tests.forkserver import run_agentctl

    path = _simple(tmp_path, "  varsFiles: [base.yaml]\n" + REPORT, {"base.yaml": "replicas: 1\n"})
    done = run_agentctl(
        ["explain", str(path), "--var", "replicas=4",
         "--var", "tags=[]", "--var", "settings={}"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        f"replicas = 4  from --var replicas=4; replaces 1 from {tmp_path / 'base.yaml'}:1:1 "
        "(spec.varsFiles)" in done.stdout
    )


def test_resume_uses_the_values_the_run_was_created_with(cli: Any, tmp_path: Path) -> None:
    body = (
        REPORT.replace(
            "    set: { kind: builtin.assign }\n",
            "    set: { kind: builtin.assign }\n    hold: { kind: builtin.pause }\n",
        )
        .replace(
            "  tasks:\n",
            "  tasks:\n    - id: wait\n      uses: action:hold\n",
        )
        .replace("      uses: action:set\n", "      uses: action:set\n      needs: [wait]\n")
    )
    path = _simple(tmp_path, "  varsFiles: [base.yaml]\n" + body, {"base.yaml": "replicas: 1\n"})
    db = tmp_path / "s.db"
    rolled = cli(
        "--output", "json", "roll", path, "--db", db, "--var", "settings=1", "--var", "tags=2"
    )
    assert rolled.exit_code == 3, rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    (tmp_path / "base.yaml").write_text("replicas: 9\n", encoding="utf-8")
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["data"]["output"]["report"] == {"settings": 1, "tags": 2, "replicas": 1}
