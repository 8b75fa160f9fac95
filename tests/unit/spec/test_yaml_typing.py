"""YAML 1.2 core typing (docs/workflow-language.md) and the source map."""

from __future__ import annotations

import pytest

from agentctl.spec import parse_workflow_text
from agentctl.spec.source_map import SourceMap, diagnostic_at, join_path, parent_path, path_of
from agentctl.spec.yaml_source import YamlProblem, parse_yaml, well_formed_text

HEADER = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata:\n  name: t\nspec:\n"


def test_dates_yes_on_stay_strings_and_booleans_are_core_only() -> None:
    parsed = parse_yaml(
        "a: 2025-11-25\nb: yes\nc: on\nd: off\ne: y\nf: [true, True, TRUE, false, False, FALSE]\n"
        "g: [~, null, Null, NULL, '']\nh: 1_000\ni: 0x1F\nj: 0o17\nk: 3.10\nl: 1e3\nm: .5\n"
        "n: 007\no: -4\np: +2\n"
    )
    assert parsed.value == {
        "a": "2025-11-25",
        "b": "yes",
        "c": "on",
        "d": "off",
        "e": "y",
        "f": [True, True, True, False, False, False],
        "g": [None, None, None, None, ""],
        "h": "1_000",
        "i": 31,
        "j": 15,
        "k": 3.1,
        "l": 1000.0,
        "m": 0.5,
        "n": 7,
        "o": -4,
        "p": 2,
    }
    assert isinstance(parsed.value["f"][0], bool)
    assert parsed.scalar_text["k"] == "3.10"
    assert parsed.scalar_text["f[1]"] == "True"
    assert "a" not in parsed.scalar_text  # strings need no original text


def test_mapping_keys_are_their_text() -> None:
    assert parse_yaml("1: a\ntrue: b\nnull: c\n").value == {"1": "a", "true": "b", "null": "c"}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("a: .inf\n", "schema_violation"),
        ("a: -.Inf\n", "schema_violation"),
        ("a: .NaN\n", "schema_violation"),
        ("a: 1e999\n", "schema_violation"),
        ("a: !!binary aGVsbG8=\n", "yaml_syntax"),
        ("a: !!set {x}\n", "yaml_syntax"),
        ("a: &x [*x]\n", "yaml_syntax"),
        ("? [a]\n: b\n", "yaml_syntax"),
        ("a: !!int nope\n", "yaml_syntax"),
        ("a: !!float nope\n", "yaml_syntax"),
        ("a: !!bool yes\n", "yaml_syntax"),
        ("[" * 5000, "yaml_syntax"),
        ("a: " + "[" * 200 + "]" * 200 + "\n", "schema_violation"),
    ],
)
def test_unusable_yaml(text: str, code: str) -> None:
    with pytest.raises(YamlProblem) as caught:
        parse_yaml(text)
    assert caught.value.code == code


def test_alias_bomb_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(YamlProblem) as caught:
        parse_yaml("\n".join(lines) + "\n")
    assert caught.value.code == "schema_violation"
    assert "more than 1000000 nodes" in caught.value.message


def test_string_fields_take_the_plain_text_of_scalars() -> None:
    text = HEADER + (
        "  policy:\n"
        "    processAllowlist: [true, 3.10, 'x']\n"
        "    environmentAllowlist: [TRUE]\n"
        "  inputs: {flag: true, version: 3.10, day: 2025-11-25, answer: yes}\n"
        "  tasks: [{id: a, uses: action:x, with: {n: 3.10}}]\n"
    )
    result = parse_workflow_text(text)
    assert result.diagnostics == []
    assert result.document is not None
    policy = result.document.spec.policy
    assert policy.process_allowlist == ["true", "3.10", "x"]
    assert policy.environment_allowlist == ["TRUE"]
    # Free-form JSON slots keep YAML's types.
    assert result.document.spec.inputs == {
        "flag": True,
        "version": 3.1,
        "day": "2025-11-25",
        "answer": "yes",
    }
    assert result.document.spec.tasks[0].with_ == {"n": 3.1}
    # The raw mapping is what was parsed, before any coercion.
    assert result.raw is not None
    assert result.raw["spec"]["policy"]["processAllowlist"] == [True, 3.1, "x"]


def test_subworkflow_version_keeps_its_text() -> None:
    text = HEADER + (
        "  subworkflows:\n    s: {version: 1.10, inputSchema: {}, outputSchema: {}, tasks: []}\n"
        "  tasks: [{id: a, uses: 'workflow:s'}]\n"
    )
    d = parse_workflow_text(text).diagnostics
    assert [(x.path, x.line) for x in d] == [("spec.subworkflows.s.version", 7)]
    assert "version `1.10` is not a semantic version" in d[0].message


def test_boolean_fields_reject_yes() -> None:
    text = HEADER + "  output: {verbose: yes}\n  tasks: [{id: a, uses: action:x}]\n"
    (d,) = parse_workflow_text(text).diagnostics
    assert (d.path, d.line) == ("spec.output.verbose", 6)
    assert d.message == 'spec.output.verbose must be a boolean (true or false), got "yes"'


def test_int_fields_reject_strings_and_floats() -> None:
    text = HEADER + "  runtime: {maxConcurrency: '2', defaultTimeoutSeconds: 2.0}\n  tasks: []\n"
    paths = [(d.path, d.message) for d in parse_workflow_text(text).diagnostics]
    assert paths[:2] == [
        ("spec.runtime.maxConcurrency", 'spec.runtime.maxConcurrency must be an integer, got "2"'),
        (
            "spec.runtime.defaultTimeoutSeconds",
            "spec.runtime.defaultTimeoutSeconds must be an integer, got 2.0",
        ),
    ]


def test_source_map_points_at_keys_and_items() -> None:
    parsed = parse_yaml("spec:\n  tasks:\n    - id: a\n      loop:\n        maxIterations: 3\n")
    source = SourceMap("w.yaml", parsed.positions)
    assert source.locate("spec.tasks[0].loop.maxIterations") == (5, 9)
    assert source.locate("spec.tasks[0]") == (3, 7)
    assert source.locate("spec.tasks[0].id") == (3, 7)
    # Unknown paths fall back to the nearest located ancestor.
    assert source.locate("spec.tasks[0].loop.while") == (4, 7)
    assert source.locate("spec.tasks[7].x") == (2, 3)
    assert source.locate("nothing.here") == (1, 1)
    assert SourceMap("empty").locate("spec") is None


def test_paths_quote_keys_that_are_not_words() -> None:
    assert (
        path_of(["spec", "actions", "my.action", "with", 0]) == 'spec.actions["my.action"].with[0]'
    )
    assert join_path("", "spec") == "spec"
    assert join_path("", 0) == "[0]"
    assert parent_path('spec.actions["my.action"]') == "spec.actions"
    assert parent_path("spec.tasks[3]") == "spec.tasks"
    assert parent_path("spec") == ""
    assert parent_path("") is None
    parsed = parse_yaml('spec:\n  actions:\n    "my.action": {kind: x}\n')
    assert SourceMap("f", parsed.positions).locate('spec.actions["my.action"].kind') == (3, 19)


def test_escaped_surrogate_pairs_join_and_lone_ones_fail() -> None:
    assert well_formed_text("\ud83d\ude00") == "\U0001f600"
    assert well_formed_text("plain \ufffd") == "plain \ufffd"
    assert well_formed_text("\ud800 lone") is None
    # libyaml refuses surrogate escapes outright; the pure-Python parser decodes them.
    try:
        assert parse_yaml('a: "\\ud83d\\ude00"\n').value == {"a": "\U0001f600"}
    except YamlProblem as problem:
        assert (problem.code, problem.line) == ("yaml_syntax", 1)
    with pytest.raises(YamlProblem) as caught:
        parse_yaml('a: 1\nb: "\\ud800"\n')
    assert (caught.value.code, caught.value.line) == ("yaml_syntax", 2)


def test_deep_nesting_fails_fast() -> None:
    block = "".join(f"{' ' * i}k{i}:\n" for i in range(200)) + " " * 200 + "v\n"
    with pytest.raises(YamlProblem) as caught:
        parse_yaml(block)
    assert caught.value.code == "schema_violation"
    assert caught.value.line == 129  # the 129th nested mapping starts there


def test_diagnostic_at_locates_with_fallback() -> None:
    source = SourceMap("w.yaml", {"": (1, 1), "spec": (5, 1), "spec.tasks[0]": (7, 5)})
    d = diagnostic_at("duplicate_task", "task `a` is declared twice", "spec.tasks[0].id", source)
    assert (d.file, d.line, d.column, d.path, d.severity) == (
        "w.yaml",
        7,
        5,
        "spec.tasks[0].id",
        "error",
    )
    w = diagnostic_at("x", "m", "spec.nothing", source, help="h", severity="warning")
    assert (w.line, w.column, w.help, w.severity) == (5, 1, "h", "warning")
    bare = diagnostic_at("x", "m", None, None)
    assert (bare.file, bare.line, bare.column, bare.path) == (None, None, None, None)
