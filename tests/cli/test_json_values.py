"""JSON values typed on the command line are JSON agentctl can keep (issue 38 item 7).

The rule, generated: a `--var`, `--inputs` or result file whose value is not finite, holds
a lone surrogate, or nests past the limit ends with exit 2 naming the value, never with an
internal error; `--input` takes such text as the string it is. `ui --port` outside 0-65535
is exit 2 naming the value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.json_text import MAX_JSON_DEPTH, parse_json_text

OK = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ok}
spec:
  inputs: {x: 0}
  actions:
    set: {kind: builtin.assign}
  tasks:
    - id: a
      uses: action:set
      with: {x: 1}
"""

non_finite = st.sampled_from(["NaN", "-NaN", "Infinity", "-Infinity"]) | st.builds(
    lambda digits, sign: f"{sign}1e{digits}", st.integers(309, 99999), st.sampled_from(["", "-"])
)
surrogate = st.integers(0xD800, 0xDFFF).map(lambda c: f'"a\\u{c:04x}b"')
deep = st.integers(MAX_JSON_DEPTH + 1, 3000).map(lambda n: "[" * n + "]" * n)


def _wrap(text: str, how: int) -> str:
    """``text`` on its own, inside a list or inside an object."""
    return [text, f"[1, {text}]", f'{{"k": {text}}}'][how]


bad_values = st.builds(_wrap, non_finite | surrogate | deep, st.integers(0, 2))
settings_cli = settings(
    max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@given(text=bad_values)
def test_the_parser_refuses_what_cannot_be_kept(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json_text(text)


@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=10,
    )
)
def test_the_parser_keeps_every_json_value(value: Any) -> None:
    assert parse_json_text(json.dumps(value)) == value


@settings_cli
@given(text=bad_values)
def test_var_with_a_value_that_cannot_be_kept_is_exit_2_naming_it(
    cli: Any, tmp_path: Path, text: str
) -> None:
    workflow = tmp_path / "ok.yaml"
    workflow.write_text(OK)
    result = cli("check", workflow, "--var", f"v={text}")
    assert result.exit_code == 2, result.stderr
    assert "--var v=" + text[:40] in result.stderr
    assert "internal error" not in result.stderr


@settings_cli
@given(text=bad_values)
def test_inputs_with_a_value_that_cannot_be_kept_is_exit_2(
    cli: Any, tmp_path: Path, text: str
) -> None:
    workflow = tmp_path / "ok.yaml"
    workflow.write_text(OK)
    result = cli("roll", workflow, "--inputs", f'{{"x": {text}}}', "--db", tmp_path / "r.db")
    assert result.exit_code == 2, result.stderr
    assert "--inputs is not valid JSON" in result.stderr
    assert not (tmp_path / "r.db").exists()


def test_input_pairs_take_such_text_as_a_string(cli: Any, tmp_path: Path) -> None:
    workflow = tmp_path / "ok.yaml"
    workflow.write_text(OK)
    for text in ("NaN", "-Infinity", "1e999", '"\\ud800"'):
        rolled = cli(
            "--output", "json", "roll", workflow, "--input", f"x={text}", "--db", tmp_path / "r.db"
        )
        assert rolled.exit_code == 0, rolled.stderr


@pytest.mark.parametrize("port", ["65536", "-1", "99999999999999999999"])
def test_ui_port_out_of_range_is_exit_2_naming_it(cli: Any, port: str) -> None:
    result = cli("ui", "--port", port)
    assert result.exit_code == 2, result.stderr
    assert "--port" in result.stderr
