"""The YAML/JSON loader: located diagnostics for every code it produces, never an exception."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent, indent

import pytest

from agentctl.diagnostics import Diagnostic
from agentctl.spec import LoadResult, Workflow, load_workflow, parse_workflow_text
from agentctl.spec.loader import MAX_DOCUMENT_BYTES

REFERENCE = Path(__file__).parents[2] / "fixtures" / "reference"

HEADER = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: demo
spec:
"""


def doc(body: str) -> str:
    """A document whose ``spec`` body starts on line 6."""
    return HEADER + indent(dedent(body), "  ")


def only(result: LoadResult) -> Diagnostic:
    assert result.document is None
    assert len(result.diagnostics) == 1, result.diagnostics
    return result.diagnostics[0]


@pytest.mark.parametrize("name", ["25_1.yaml", "25_2.yaml", "25_3.yaml", "25_4.yaml"])
def test_reference_examples_load_without_diagnostics(name: str) -> None:
    result = load_workflow(REFERENCE / name)
    assert result.diagnostics == []
    assert result.ok
    assert isinstance(result.document, Workflow)
    assert result.raw is not None and list(result.raw) == ["apiVersion", "kind", "metadata", "spec"]


def test_reference_example_values_are_typed() -> None:
    result = load_workflow(REFERENCE / "25_4.yaml")
    assert result.document is not None
    spec = result.document.spec
    assert spec.subworkflows["render-config"].version == "1.2.0"
    assert spec.runtime.max_concurrency == 2
    assert spec.runtime.budgets.max_tasks == 16
    assert spec.tasks[3].compensate is not None
    assert spec.tasks[3].compensate.uses == "action:put"
    assert spec.memory.working == {"owner": "platform"}


def test_yaml_syntax_error_has_line_and_column() -> None:
    d = only(parse_workflow_text(doc("  tasks: [a, b\n  x: 1\n"), "f.yaml"))
    assert d.code == "yaml_syntax"
    assert d.file == "f.yaml"
    assert d.line == 7
    assert d.column is not None


def test_duplicate_key_is_yaml_syntax_at_second_occurrence() -> None:
    text = doc(
        """\
        tasks:
          - id: a
            uses: action:set
            uses: action:other
        """
    )
    d = only(parse_workflow_text(text))
    assert d.code == "yaml_syntax"
    assert "duplicate key `uses`" in d.message
    assert "line 8" in d.message
    assert (d.line, d.column) == (9, 7)


def test_unknown_field_in_task_names_field_and_allowed_fields() -> None:
    text = doc(
        """\
        actions:
          set: {kind: builtin.assign}
        tasks:
          - id: a
            uses: action:set
            wth: {x: 1}
        """
    )
    d = only(parse_workflow_text(text))
    assert d.code == "schema_violation"
    assert d.path == "spec.tasks[0].wth"
    assert d.message == "unknown field `wth` at spec.tasks[0]"
    assert (d.line, d.column) == (11, 7)
    assert d.help is not None
    assert d.help.startswith("did you mean `with`?")
    assert "needs" in d.help and "memoryWrites" in d.help


@pytest.mark.parametrize(
    ("body", "path", "line"),
    [
        (
            "  tasks: [{id: a, uses: router, route: {select: x, cases: [{equals: 1, tasks: [b], "
            "extra: 2}]}}]\n",
            "spec.tasks[0].route.cases[0].extra",
            6,
        ),
        (
            "  policy:\n    approvals: never\n  tasks: [{id: a, uses: action:x}]\n",
            "spec.policy.approvals",
            7,
        ),
        (
            "  runtime:\n    budgets: {maxTask: 3}\n  tasks: [{id: a, uses: action:x}]\n",
            "spec.runtime.budgets.maxTask",
            7,
        ),
        ("  tasks: [{id: a, uses: action:x}]\n  bogus: 1\n", "spec.bogus", 7),
    ],
)
def test_unknown_fields_at_several_levels(body: str, path: str, line: int) -> None:
    d = only(parse_workflow_text(HEADER + body))
    assert d.code == "schema_violation"
    assert d.path == path
    assert d.line == line
    assert d.message.startswith("unknown field")


@pytest.mark.parametrize(
    ("body", "path", "camel", "line"),
    [
        (
            "  tasks: [{id: a, uses: action:x, timeout_seconds: 5}]\n",
            "spec.tasks[0]",
            "timeoutSeconds",
            6,
        ),
        (
            "  tasks:\n    - id: a\n      uses: action:x\n      retry: {max_attempts: 3}\n",
            "spec.tasks[0].retry",
            "maxAttempts",
            9,
        ),
        (
            "  runtime: {max_concurrency: 2}\n  tasks: [{id: a, uses: action:x}]\n",
            "spec.runtime",
            "maxConcurrency",
            6,
        ),
        (
            "  policy: {process_allowlist: [python3]}\n  tasks: [{id: a, uses: action:x}]\n",
            "spec.policy",
            "processAllowlist",
            6,
        ),
        (
            "  agents: {a: {provider: p, model: m, instructions: x, max_turns: 2}}\n"
            "  tasks: [{id: a, uses: agent:a}]\n",
            "spec.agents.a",
            "maxTurns",
            6,
        ),
        (
            "  actions:\n    x:\n      kind: builtin.shell.exec\n      command: ls\n"
            "      env: {T: {process: {command: pass, timeout_seconds: 3}}}\n"
            "  tasks: [{id: a, uses: action:x}]\n",
            "spec.actions.x.env.T.process",
            "timeoutSeconds",
            10,
        ),
    ],
)
def test_snake_case_field_names_are_unknown_fields(
    body: str, path: str, camel: str, line: int
) -> None:
    # pydantic would accept the Python attribute name as a synonym; the format does not.
    result = parse_workflow_text(HEADER + body)
    assert result.document is None
    found = [d for d in result.diagnostics if d.code == "schema_violation"]
    assert len(found) == 1, result.diagnostics
    d = found[0]
    snake = d.path.rsplit(".", 1)[-1] if d.path else ""
    assert d.path == f"{path}.{snake}" and "_" in snake
    assert d.line == line
    assert f"spells it `{camel}`" in d.message
    assert d.help == f"rename `{snake}` to `{camel}`"


def test_python_constructors_still_take_snake_case_names() -> None:
    from agentctl.spec.models_common import Retry

    assert Retry(max_attempts=3).max_attempts == 3


def test_unknown_top_level_and_metadata_fields() -> None:
    text = HEADER.replace("  name: demo\n", "  name: demo\n  owner: me\n") + "  tasks: []\n"
    result = parse_workflow_text(text + "status: x\n")
    by_path = {d.path: d for d in result.diagnostics}
    assert by_path["metadata.owner"].line == 5
    assert by_path["status"].message == "unknown field `status` at the document root"
    assert by_path["spec.tasks"].message == "spec.tasks must have at least 1 item"
    # Document order: metadata (line 5), spec.tasks (line 7), status (line 8).
    assert [d.line for d in result.diagnostics] == [5, 7, 8]


def test_loop_bound_message_and_location() -> None:
    text = doc(
        """\
        tasks:
          - id: soak
            uses: action:set
            loop:
              maxIterations: 100
              while: "${{ vars.loopIndex < 2 }}"
        """
    )
    d = only(parse_workflow_text(text))
    assert d.code == "schema_violation"
    assert d.path == "spec.tasks[0].loop.maxIterations"
    assert d.message == "spec.tasks[0].loop.maxIterations must be between 1 and 64, got 100"
    assert (d.line, d.column) == (10, 9)


@pytest.mark.parametrize(
    ("snippet", "path", "message"),
    [
        (
            "retry: {maxAttempts: 21}",
            "spec.tasks[0].retry.maxAttempts",
            "must be between 1 and 20, got 21",
        ),
        (
            "retry: {backoffMs: 60001}",
            "spec.tasks[0].retry.backoffMs",
            "must be between 0 and 60000, got 60001",
        ),
        ("timeoutSeconds: 0", "spec.tasks[0].timeoutSeconds", "must be between 1 and 86400, got 0"),
        (
            "failure: ignore",
            "spec.tasks[0].failure",
            "must be 'stop' or 'continue', got \"ignore\"",
        ),
        ("needs: a", "spec.tasks[0].needs", 'must be a list, got "a"'),
        ("with: [1]", "spec.tasks[0].with", "must be a mapping, got a list"),
    ],
)
def test_task_field_bounds(snippet: str, path: str, message: str) -> None:
    text = doc(f"  tasks:\n    - id: a\n      uses: action:set\n      {snippet}\n")
    d = only(parse_workflow_text(text))
    assert d.path == path
    assert d.message == f"{path} {message}"
    assert d.line == 9


def test_agent_and_runtime_bounds() -> None:
    text = doc(
        """\
        runtime: {maxConcurrency: 65}
        agents:
          a: {provider: p, model: m, instructions: hi, maxTurns: 0, maxToolCalls: 257}
        tasks: [{id: t, uses: agent:a}]
        """
    )
    result = parse_workflow_text(text)
    messages = {d.path: (d.message, d.line) for d in result.diagnostics}
    assert messages == {
        "spec.runtime.maxConcurrency": (
            "spec.runtime.maxConcurrency must be between 1 and 64, got 65",
            6,
        ),
        "spec.agents.a.maxTurns": ("spec.agents.a.maxTurns must be between 1 and 64, got 0", 8),
        "spec.agents.a.maxToolCalls": (
            "spec.agents.a.maxToolCalls must be between 0 and 256, got 257",
            8,
        ),
    }


def test_identifier_rule_for_task_ids_tools_foreach_and_axes() -> None:
    text = doc(
        """\
        tools:
          1tool: {kind: builtin.echo, description: d, inputSchema: {}, outputSchema: {},
                  capability: internal, risk: low, effectClass: pure, idempotency: pure,
                  retrySafe: true, timeoutSeconds: 1}
        tasks:
          - id: _a
            uses: action:x
          - id: b
            uses: action:x
            foreach: {items: [1], as: "my item"}
          - id: c
            uses: action:x
            matrix: {axes: {os.name: [x]}}
        """
    )
    result = parse_workflow_text(text)
    paths = [(d.path, d.line) for d in result.diagnostics]
    assert paths == [
        ("spec.tools.1tool", 7),
        ("spec.tasks[0].id", 11),
        ("spec.tasks[1].foreach.as", 15),
        ('spec.tasks[2].matrix.axes["os.name"]', 18),
    ]
    assert all(d.code == "schema_violation" for d in result.diagnostics)
    assert "`_a` is not a valid identifier" in result.diagnostics[1].message


@pytest.mark.parametrize(
    "ref",
    [
        "{env: 1BAD}",
        "{env: A, file: b}",
        "OPENAI_API_KEY",
        "{vault: x}",
        "{process: {args: []}}",
        "{file: ''}",
    ],
)
def test_invalid_secret_reference(ref: str) -> None:
    text = doc(
        f"  providers:\n    p:\n      kind: openai\n      credential: {ref}\n"
        "  tasks: [{id: a, uses: action:x}]\n"
    )
    d = only(parse_workflow_text(text))
    assert d.code == "invalid_secret_reference"
    assert d.path == "spec.providers.p.credential"
    assert (d.line, d.column) == (9, 7)


def test_secret_references_in_headers_env_and_tools() -> None:
    text = doc(
        """\
        actions:
          sh: {kind: builtin.shell.exec, command: make, env: {TOKEN: {env: TOKEN}, BAD: {}}}
        mcpServers:
          m: {url: "https://x", headers: {Authorization: {file: /secrets/m}}}
        tasks: [{id: a, uses: action:sh}]
        """
    )
    d = only(parse_workflow_text(text))
    assert (d.code, d.path, d.line) == ("invalid_secret_reference", "spec.actions.sh.env.BAD", 7)


def test_unsupported_version_v1alpha1() -> None:
    text = HEADER.replace("agentctl.dev/v1", "agentctl.dev/v1alpha1") + "  tasks: []\n"
    d = only(parse_workflow_text(text, "old.yaml"))
    assert d.code == "unsupported_version"
    assert d.path == "apiVersion"
    assert (d.line, d.column) == (1, 1)
    assert d.help == "use agentctl.dev/v1"
    assert d.file == "old.yaml"


def test_unknown_api_version() -> None:
    d = only(parse_workflow_text("apiVersion: v2\nkind: Workflow\n"))
    assert (d.code, d.line) == ("unsupported_version", 1)
    assert d.message == 'unsupported apiVersion "v2"'


def test_legacy_playbook_requires_migration() -> None:
    d = only(parse_workflow_text("# old\nplaybook: deploy\nmodules: {}\n"))
    assert d.code == "migration_required"
    assert d.severity == "error"
    assert (d.path, d.line) == ("playbook", 2)
    assert d.help is not None and "metadata.name" in d.help


def test_missing_api_version_without_playbook() -> None:
    d = only(parse_workflow_text("kind: Workflow\nmetadata: {name: x}\n"))
    assert (d.code, d.path) == ("schema_violation", "apiVersion")
    assert d.message == "missing required field `apiVersion` at the document root"


def test_wrong_kind() -> None:
    text = (
        HEADER.replace("kind: Workflow", "kind: workflow") + "  tasks: [{id: a, uses: router2}]\n"
    )
    result = parse_workflow_text(text)
    kind = result.diagnostics[0]
    assert (kind.code, kind.path, kind.line) == ("schema_violation", "kind", 2)
    assert kind.message == "kind must be 'Workflow', got \"workflow\""
    uses = result.diagnostics[1]
    assert uses.path == "spec.tasks[0].uses"
    assert "must be `action:<name>`" in uses.message


def test_missing_required_fields() -> None:
    result = parse_workflow_text("apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {}\n")
    assert [(d.path, d.line, d.message) for d in result.diagnostics] == [
        ("spec", 1, "missing required field `spec` at the document root"),
        ("metadata.name", 3, "missing required field `name` at metadata"),
    ]


def test_empty_and_non_mapping_documents() -> None:
    assert only(parse_workflow_text("")).message == "the workflow document is empty"
    d = only(parse_workflow_text("- a\n- b\n"))
    assert d.code == "schema_violation"
    assert d.message == "a workflow document must be a mapping, got a list"
    assert (d.line, d.column) == (1, 1)


def test_multiple_documents_are_rejected() -> None:
    d = only(parse_workflow_text(HEADER + "  tasks: []\n---\nkind: x\n"))
    assert d.code == "yaml_syntax"
    assert d.line == 7


def test_size_cap_for_text_and_file(tmp_path: Path) -> None:
    big = doc("  tasks: [{id: a, uses: action:x}]\n") + "#" * MAX_DOCUMENT_BYTES
    d = only(parse_workflow_text(big))
    assert d.code == "schema_violation"
    assert "limit is 1048576 bytes" in d.message
    target = tmp_path / "big.yaml"
    target.write_text(big)
    d = only(load_workflow(target))
    assert d.code == "schema_violation"
    assert d.file == str(target)
    assert f"big.yaml is {len(big)} bytes; the limit is 1048576 bytes" in d.message


def test_exactly_the_size_cap_is_accepted(tmp_path: Path) -> None:
    body = doc("  actions: {x: {kind: builtin.assign}}\n  tasks: [{id: a, uses: action:x}]\n")
    padded = body + "#" * (MAX_DOCUMENT_BYTES - len(body))
    target = tmp_path / "edge.yaml"
    target.write_text(padded)
    assert target.stat().st_size == MAX_DOCUMENT_BYTES
    assert load_workflow(target).ok


def test_unreadable_file_is_a_diagnostic(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    d = only(load_workflow(missing))
    assert d.code == "schema_violation"
    assert d.file == str(missing)
    assert d.message == f"workflow file {missing} does not exist"
    d = only(load_workflow(tmp_path))
    assert d.message == f"workflow file {tmp_path} is a directory, not a regular file"


def test_invalid_utf8_file(tmp_path: Path) -> None:
    target = tmp_path / "bad.yaml"
    target.write_bytes(b"apiVersion: agentctl.dev/v1\nkind: \xff\n")
    d = only(load_workflow(target))
    assert (d.code, d.line) == ("yaml_syntax", 2)


def test_json_workflow_file_with_positions(tmp_path: Path) -> None:
    document = {
        "apiVersion": "agentctl.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": "j"},
        "spec": {"tasks": [{"id": "a", "uses": "action:x", "loop": {"maxIterations": 0}}]},
    }
    target = tmp_path / "w.json"
    target.write_text(json.dumps(document, indent=2))
    result = load_workflow(target)
    assert [(d.path, d.line, d.column) for d in result.diagnostics] == [
        ("spec.tasks[0].loop.while", 12, 9),
        ("spec.tasks[0].loop.maxIterations", 13, 11),
    ]


def test_json_syntax_and_duplicates(tmp_path: Path) -> None:
    target = tmp_path / "w.json"
    target.write_text('{"apiVersion": "agentctl.dev/v1",\n "kind": }')
    d = only(load_workflow(target))
    assert (d.code, d.line, d.column) == ("yaml_syntax", 2, 10)
    target.write_text('{"a": 1, "a": 2}')
    d = only(load_workflow(target))
    assert d.code == "yaml_syntax"
    assert "duplicate key `a`" in d.message
    target.write_text('{"a": NaN}')
    assert only(load_workflow(target)).code == "yaml_syntax"


def test_valid_json_file_loads(tmp_path: Path) -> None:
    source = load_workflow(REFERENCE / "25_3.yaml")
    assert source.raw is not None
    target = tmp_path / "w.json"
    target.write_text(json.dumps(source.raw))
    result = load_workflow(target)
    assert result.ok
    assert result.document == source.document
