"""Python definitions: the builder, its YAML equivalence, and loading ``.py`` files."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from agentctl.errors import ValidationError
from agentctl.spec import LoadResult, Workflow, load_workflow
from agentctl.spec.python_api import (
    WorkflowBuilder,
    case,
    compensate,
    env,
    foreach,
    loop,
    matrix,
    retry,
    route,
    task,
)

EXAMPLES = Path(__file__).parents[3] / "workflows" / "python"


def test_python_and_yaml_review_pipeline_are_the_same_model() -> None:
    from_yaml = load_workflow(EXAMPLES / "review_pipeline.yaml")
    from_python = load_workflow(EXAMPLES / "review_pipeline.py")
    assert from_yaml.diagnostics == [] and from_python.diagnostics == []
    assert from_yaml.document is not None and from_python.document is not None
    assert from_python.document.model_dump(
        by_alias=True, exclude_unset=False
    ) == from_yaml.document.model_dump(by_alias=True, exclude_unset=False)
    assert from_python.document == from_yaml.document
    spec = from_python.document.spec
    # The constructs the example is meant to cover really are there.
    assert spec.tasks[0].foreach is not None and spec.tasks[0].foreach.as_ == "file"
    assert spec.tasks[1].route is not None and spec.tasks[1].route.default == ["quick"]
    assert spec.tasks[4].loop is not None and spec.tasks[4].loop.initial == {"draft": "none"}
    assert spec.tasks[5].uses_ref.kind == "workflow"
    assert spec.agents["reviewer"].tools == ["read_file"]
    assert from_python.raw is not None and from_python.raw["metadata"]["name"] == "review-pipeline"
    # The same model gives the same identities: plan digest and every task's fingerprint.
    from agentctl.compiler import compile_workflow

    plans = [compile_workflow(loaded.document).plan for loaded in (from_yaml, from_python)]
    assert plans[0] is not None and plans[1] is not None
    assert plans[0].plan_digest == plans[1].plan_digest
    assert plans[0].workflow_digest == plans[1].workflow_digest
    assert {t: p.definition_fingerprint for t, p in plans[0].tasks.items()} == {
        t: p.definition_fingerprint for t, p in plans[1].tasks.items()
    }


def test_construct_helpers_produce_the_yaml_shape() -> None:
    assert foreach([1, 2], as_="n", max_items=4) == {"items": [1, 2], "as": "n", "maxItems": 4}
    assert matrix({"os": ("a", "b")}) == {"axes": {"os": ["a", "b"]}}
    assert loop(3, "x") == {"maxIterations": 3, "while": "x"}
    assert loop(3, "x", initial=None) == {"maxIterations": 3, "while": "x", "initial": None}
    assert route("s", case(1, "a", "b")) == {
        "select": "s",
        "cases": [{"equals": 1, "tasks": ["a", "b"]}],
    }
    assert retry(3, 100) == {"maxAttempts": 3, "backoffMs": 100}
    assert retry(2) == {"maxAttempts": 2}
    assert retry(3, backoff={"kind": "exponential"}, retry_on=["transient"]) == {
        "maxAttempts": 3,
        "backoff": {"kind": "exponential"},
        "retryOn": ["transient"],
    }
    assert env("TOKEN") == {"env": "TOKEN"}
    assert compensate("action:put", with_={"k": 1}, timeout_seconds=5) == {
        "uses": "action:put",
        "with": {"k": 1},
        "timeoutSeconds": 5,
    }
    assert task("a", uses="action:x", memory_writes=["k"], output_schema={}) == {
        "id": "a",
        "uses": "action:x",
        "memoryWrites": ["k"],
        "outputSchema": {},
    }


def test_builder_renames_nested_options() -> None:
    builder = (
        WorkflowBuilder("n")
        .policy(network={"allow_private": True, "custom_ca": env("CA")}, tools_deny=["x"])
        .runtime(max_concurrency=2, budgets={"max_tasks": 5})
        .memory(working={"snake_key": 1}, long_term={"retention_days": 3})
        .provider("o", "openai", credential=env("KEY"), headers={"X-A": env("A")})
        .mcp_server("m", "https://mcp", timeout_seconds=5)
        .a2a_peer("p", "https://peer/card", max_polls=3)
        .compensation(on_failure="automatic")
        .output_settings(show_diff=False)
        .task("a", uses="action:x", retry=retry(2))
    )
    spec = builder.to_document()["spec"]
    assert spec["policy"] == {
        "network": {"allowPrivate": True, "customCa": {"env": "CA"}},
        "toolsDeny": ["x"],
    }
    assert spec["runtime"] == {"maxConcurrency": 2, "budgets": {"maxTasks": 5}}
    # JSON slots are left alone: working memory keys are the user's own.
    assert spec["memory"] == {"working": {"snake_key": 1}, "longTerm": {"retentionDays": 3}}
    assert list(spec) == [
        "providers",
        "compensation",
        "tasks",
        "policy",
        "memory",
        "mcpServers",
        "a2aPeers",
        "runtime",
        "output",
    ]
    workflow = builder.build()
    assert isinstance(workflow, Workflow)
    assert workflow.spec.policy.network.allow_private is True
    assert workflow.spec.a2a_peers["p"].max_polls == 3
    assert workflow.spec.output.show_diff is False


def test_build_raises_validation_error_with_located_diagnostics() -> None:
    builder = WorkflowBuilder("bad").action("set", "builtin.assign")
    builder.task("a", uses="action:set", loop=loop(100, "x"))
    line = test_build_raises_validation_error_with_located_diagnostics.__code__.co_firstlineno + 2
    with pytest.raises(ValidationError) as caught:
        builder.build()
    (d,) = caught.value.diagnostics
    assert d.code == "schema_violation"
    assert d.path == "spec.tasks[0].loop.maxIterations"
    assert d.message == "spec.tasks[0].loop.maxIterations must be between 1 and 64, got 100"
    assert d.line == line
    assert d.file == __file__
    assert caught.value.exit_code == 2


def write(tmp_path: Path, source: str, name: str = "wf.py") -> Path:
    target = tmp_path / name
    target.write_text(dedent(source))
    return target


def only(result: LoadResult) -> tuple[str, int | None, str]:
    assert result.document is None
    (d,) = result.diagnostics
    assert d.file == str(result.path)
    return d.code, d.line, d.message


def test_py_file_with_build_function_and_mapping(tmp_path: Path) -> None:
    target = write(
        tmp_path,
        """\
        def build():
            return {
                "apiVersion": "agentctl.dev/v1",
                "kind": "Workflow",
                "metadata": {"name": "m"},
                "spec": {"tasks": [{"id": "a", "uses": "action:x"}]},
            }
        """,
    )
    result = load_workflow(target)
    assert result.ok
    assert result.document is not None and result.document.name == "m"


def test_py_file_with_built_model(tmp_path: Path) -> None:
    target = write(
        tmp_path,
        """\
        from agentctl.spec.python_api import WorkflowBuilder

        workflow = WorkflowBuilder("built").task("a", uses="action:x").build()
        """,
    )
    result = load_workflow(target)
    assert result.ok
    assert result.raw is not None and result.raw["spec"]["tasks"][0]["id"] == "a"


def test_py_file_invalid_builder_points_at_the_task_call(tmp_path: Path) -> None:
    target = write(
        tmp_path,
        """\
        from agentctl.spec.python_api import WorkflowBuilder

        workflow = (
            WorkflowBuilder("w")
            .agent("a", provider="p", model="m", instructions="x", max_turn=3)
            .task("ok", uses="agent:a")
            .task("9bad", uses="agent:a")
        )
        """,
    )
    result = load_workflow(target)
    assert result.document is None
    found = [(d.code, d.path, d.line) for d in result.diagnostics]
    assert found == [
        ("schema_violation", "spec.agents.a.max_turn", 5),
        ("schema_violation", "spec.tasks[1].id", 7),
    ]
    assert result.diagnostics[0].help is not None
    assert result.diagnostics[0].help.startswith("did you mean `maxTurns`?")


def test_py_file_build_inside_module_reports_its_diagnostics(tmp_path: Path) -> None:
    target = write(
        tmp_path,
        """\
        from agentctl.spec.python_api import WorkflowBuilder

        workflow = WorkflowBuilder("w").task("a", uses="team:x").build()
        """,
    )
    code, line, message = only(load_workflow(target))
    assert (code, line) == ("schema_violation", 3)
    assert "`team:` references are not supported" in message


@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        ("x = 1\ndef broken(:\n", 2, "SyntaxError: invalid syntax"),
        ("import json\n\nworkflow = json.loads('{')\n", 3, "JSONDecodeError: Expecting"),
        ("def build():\n    raise RuntimeError('boom')\n", 2, "RuntimeError: boom"),
        ("import sys\nsys.exit(3)\n", 2, "the definition called sys.exit(3)"),
        ("value = 1\n", None, "defines neither a module-level `workflow` nor a `build()`"),
        ("workflow = 42\n", None, "`workflow` must be a WorkflowBuilder, a Workflow or a mapping"),
    ],
)
def test_py_file_failures_are_python_definition_diagnostics(
    tmp_path: Path, source: str, line: int | None, message: str
) -> None:
    code, got_line, got_message = only(load_workflow(write(tmp_path, source)))
    assert code == "python_definition"
    assert got_line == line
    assert message in got_message


def test_missing_py_file(tmp_path: Path) -> None:
    code, line, message = only(load_workflow(tmp_path / "absent.py"))
    assert (code, line) == ("schema_violation", None)  # as for a YAML file: one reader
    assert message.endswith("absent.py does not exist")


def test_loading_twice_runs_the_module_afresh(tmp_path: Path) -> None:
    target = write(
        tmp_path,
        """\
        from agentctl.spec.python_api import WorkflowBuilder
        workflow = WorkflowBuilder("first").task("a", uses="action:x")
        """,
    )
    assert load_workflow(target).ok
    assert not (tmp_path / "__pycache__").exists()
    target.write_text(target.read_text().replace('"first"', '"second"'))
    second = load_workflow(target)
    assert second.document is not None and second.document.name == "second"


def test_py_file_size_cap(tmp_path: Path) -> None:
    target = write(tmp_path, "workflow = None\n" + "#" * 1_048_576 + "\n")
    code, line, message = only(load_workflow(target))
    assert (code, line) == ("schema_violation", None)
    assert "the limit is 1048576 bytes" in message


def test_string_items_are_not_split_into_characters() -> None:
    builder = WorkflowBuilder("w").task("a", uses="action:x", foreach=foreach("${{ inputs.xs }}"))
    with pytest.raises(ValidationError) as caught:
        builder.build()
    (d,) = caught.value.diagnostics
    assert d.path == "spec.tasks[0].foreach.items"
    assert d.message == 'spec.tasks[0].foreach.items must be a list, got "${{ inputs.xs }}"'


def test_docstring_example_builds() -> None:
    from agentctl.spec import python_api

    assert python_api.__doc__ is not None
    example = python_api.__doc__.split("\n\n", 1)[1].split("\nKeyword arguments")[0]
    namespace: dict[str, object] = {}
    exec(dedent(example), namespace)
    built = namespace["workflow"]
    assert isinstance(built, WorkflowBuilder)
    workflow = built.build()
    assert workflow.spec.tasks[0].foreach is not None
    assert workflow.spec.tasks[0].foreach.items == ["ada", "grace"]
