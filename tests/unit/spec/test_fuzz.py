"""Hostile input never escapes as an exception or a hang: it becomes diagnostics."""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.spec import LoadResult, load_workflow, parse_workflow_text
from agentctl.spec.yaml_source import YamlProblem, parse_yaml

REFERENCE = Path(__file__).parents[2] / "fixtures" / "reference"
VALID = [(REFERENCE / f"25_{i}.yaml").read_text() for i in range(1, 5)]

FUZZ = settings(
    max_examples=int(os.environ.get("AGENTCTL_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
    database=None,
)

YAML_ALPHABET = st.sampled_from(
    list("abcdefxyz0123456789 \n\t:-[]{},#&*!|>'\"%@`?~.\\") + ["true", "null", "\u00e9", "\x00"]
)


def check(result: LoadResult) -> None:
    assert isinstance(result, LoadResult)
    if result.document is None:
        assert result.diagnostics, "a missing document must be explained"
    for diagnostic in result.diagnostics:
        assert diagnostic.code in {
            "yaml_syntax",
            "schema_violation",
            "unsupported_version",
            "migration_required",
            "invalid_secret_reference",
        }
        assert diagnostic.message
        # The loader's last-resort handler turns bugs into diagnostics; fuzzing must not hit it.
        assert not diagnostic.message.startswith("the document could not be read"), diagnostic
        if diagnostic.line is not None:
            assert diagnostic.line >= 1


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    check(parse_workflow_text(text))


@FUZZ
@given(st.lists(YAML_ALPHABET, max_size=200).map("".join))
def test_yaml_flavoured_text(text: str) -> None:
    check(parse_workflow_text(text))


@FUZZ
@given(
    st.sampled_from(VALID),
    st.lists(
        st.tuples(
            st.integers(0, 10_000), st.sampled_from(["delete", "insert", "swap"]), YAML_ALPHABET
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_mutated_valid_documents(text: str, edits: list[tuple[int, str, str]]) -> None:
    for position, action, piece in edits:
        at = position % (len(text) + 1)
        if action == "delete":
            text = text[:at] + text[at + 1 :]
        elif action == "insert":
            text = text[:at] + piece + text[at:]
        else:
            text = text[:at] + piece + text[at + len(piece) :]
    check(parse_workflow_text(text))


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)


@FUZZ
@given(
    st.sampled_from(VALID),
    st.integers(0, 10_000),
    st.recursive(
        JSON_SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=6,
    ),
)
def test_documents_with_a_replaced_value(text: str, seed: int, value: object) -> None:
    """Structure-aware mutation: replace one node of a valid document with a random value."""
    parsed = parse_yaml(text)
    paths = sorted(p for p in parsed.positions if p)
    target = random.Random(seed).choice(paths)
    lines = text.splitlines()
    line, column = parsed.positions[target]
    prefix = lines[line - 1][: column - 1]
    if prefix.strip().startswith("- ") or prefix.strip() == "-":
        return
    key, sep, _ = lines[line - 1][column - 1 :].partition(":")
    if not sep:
        return
    lines[line - 1] = f"{prefix}{key}: {json.dumps(value)}"
    check(parse_workflow_text("\n".join(lines) + "\n"))


def test_parse_yaml_raises_only_yaml_problem() -> None:
    texts = ["a: !!float 0x" + "f" * 400, "a: !!int " + "9" * 5000, "a: [", "a: 1\nb: \x00"]
    for text in texts:
        with pytest.raises(YamlProblem) as caught:
            parse_yaml(text)
        assert caught.value.code in {"yaml_syntax", "schema_violation"}
    with pytest.raises(YamlProblem) as caught:
        parse_yaml("a: 1\nb: \x00")
    assert (caught.value.line, caught.value.column) == (2, 4)


@FUZZ
@given(
    st.recursive(
        JSON_SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(
                st.sampled_from(["apiVersion", "kind", "metadata", "spec", "tasks", "id", "x"]),
                inner,
                max_size=4,
            ),
        ),
        max_leaves=12,
    ),
    st.booleans(),
)
def test_json_files(value: object, indented: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "w.json"
        target.write_text(json.dumps(value, indent=2 if indented else None))
        check(load_workflow(target))
