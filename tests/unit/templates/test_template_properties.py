"""Properties of the template language over generated input (hypothesis)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentctl.spec.template_rewrite import rewrite_references
from agentctl.spec.template_values import (
    WHITESPACE,
    is_json_number,
    is_truthy,
    json_equal,
    json_text,
    parse_literal,
)
from agentctl.spec.templates import (
    TemplateContext,
    TemplateError,
    evaluate_condition,
    find_references,
    parse_template,
    render,
    template_errors,
)

FAST = settings(max_examples=150, deadline=None)

CONTEXT = TemplateContext(
    inputs={"a": 1, "f": 1.0, "s": "a==b", "n": 2.5, "q": "'x'", "o": {"k": [1]}},
    vars={"v": True, "loopIndex": 2},
    memory={"m": None},
    tasks={"t": {"k": "x", "z": 0}},
)

TEMPLATEISH = st.text(alphabet="${} .=!<>'\"not inputsvarmemorytaskoupu1[]-_\n\u00a0é", max_size=60)
ANY_TEXT = st.one_of(st.text(max_size=120), TEMPLATEISH)


@FAST
@given(ANY_TEXT)
def test_parse_raises_only_template_errors(text: str) -> None:
    try:
        template = parse_template(text)
    except TemplateError:
        return
    try:
        render(text, CONTEXT)
    except TemplateError:
        pass
    assert len(find_references(text)) == len(template.spans)
    assert template_errors(text) == []


@FAST
@given(ANY_TEXT)
def test_conditions_raise_only_template_errors(text: str) -> None:
    try:
        result = evaluate_condition(text, CONTEXT)
    except TemplateError:
        return
    assert isinstance(result, bool)


@FAST
@given(st.lists(ANY_TEXT, max_size=4))
def test_template_errors_never_raises_and_agrees_with_parse(texts: list[str]) -> None:
    errors = template_errors(texts)
    failing = set()
    for index, text in enumerate(texts):
        try:
            parse_template(text)
        except TemplateError:
            failing.add(f"[{index}]")
    assert {location for location, _ in errors} == failing


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20).filter(lambda s: "${{" not in s),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@FAST
@given(JSON_VALUES)
def test_render_of_template_free_value_is_identity(value: Any) -> None:
    assert json_equal(render(value, TemplateContext()), value)
    assert find_references(value) == []


@FAST
@given(JSON_VALUES)
def test_exact_template_returns_the_value_with_its_type(value: Any) -> None:
    context = TemplateContext(inputs={"value": value})
    assert json_equal(render("${{ inputs.value }}", context), value)


def _containers(value: Any) -> list[int]:
    found = []
    if isinstance(value, dict | list):
        found.append(id(value))
        for item in value.values() if isinstance(value, dict) else value:
            found.extend(_containers(item))
    return found


@FAST
@given(JSON_VALUES)
def test_a_value_read_whole_is_an_equal_copy_sharing_no_object_or_array(value: Any) -> None:
    copied = render("${{ inputs.value }}", TemplateContext(inputs={"value": value}))
    assert copied == value and type(copied) is type(value)
    assert not set(_containers(copied)) & set(_containers(value))


@FAST
@given(ANY_TEXT)
def test_identity_rewrite_changes_nothing(text: str) -> None:
    assert rewrite_references(text, lambda path: path) == text
    assert rewrite_references(text, lambda path: path, condition=True) == text


@FAST
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_text_round_trips(number: float) -> None:
    text = json_text(number)
    assert float(text) == number
    assert "+" not in text and ("." in text or "e" in text)


# --- Operator parsing: agreement with the reference's split-at-first-occurrence rule -------------

_OPS = ("==", "!=", "<=", ">=", "<", ">")
_SEGMENT = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Failed(Exception):
    """The reference model reports an error."""


def _reference_resolve(path: str, context: TemplateContext) -> Any:
    parts = path.split(".")
    if any(not part or not set(part) <= _SEGMENT for part in parts):
        raise _Failed(path)
    if parts[0] in ("inputs", "vars", "memory") and len(parts) >= 2:
        root = getattr(context, parts[0])
        if parts[1] not in root:
            raise _Failed(path)
        value, rest = root[parts[1]], parts[2:]
    elif parts[0] == "tasks" and len(parts) >= 3 and parts[2] == "output":
        if parts[1] not in context.tasks:
            raise _Failed(path)
        value, rest = context.tasks[parts[1]], parts[3:]
    else:
        raise _Failed(path)
    for part in rest:
        if not isinstance(value, dict) or part not in value:
            raise _Failed(path)
        value = value[part]
    return value


def _reference_condition(text: str, context: TemplateContext) -> bool:
    """Conditions (docs/templates.md) as upstream evaluates them: operator by priority, split
    at the first occurrence."""
    trimmed = text.strip(WHITESPACE)
    if trimmed.startswith("${{") and trimmed[3:].endswith("}}"):
        inner = trimmed[3:-2].strip(WHITESPACE)
    else:
        inner = trimmed
    negated = inner.startswith("not ")
    candidate = inner[4:].strip(WHITESPACE) if negated else inner
    for op in _OPS:
        if op in candidate:
            left_text, right_text = candidate.split(op, 1)
            left = _reference_resolve(left_text.strip(WHITESPACE), context)
            right_text = right_text.strip(WHITESPACE)
            if not right_text:
                raise _Failed(text)
            right = parse_literal(right_text)
            if op == "==":
                result = json_equal(left, right)
            elif op == "!=":
                result = not json_equal(left, right)
            else:
                if not (is_json_number(left) and is_json_number(right)):
                    raise _Failed(text)
                a, b = float(left), float(right)
                result = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
            break
    else:
        result = is_truthy(_reference_resolve(candidate, context))
    return not result if negated else result


CONDITIONS = st.builds(
    lambda wrap, neg, path, sp1, op, sp2, right: (
        f"${{{{ {neg}{path}{sp1}{op}{sp2}{right} }}}}"
        if wrap
        else f"{neg}{path}{sp1}{op}{sp2}{right}"
    ),
    st.booleans(),
    st.sampled_from(["", "not ", "not  "]),
    st.sampled_from(
        [
            "inputs.a",
            "inputs.f",
            "inputs.s",
            "inputs.n",
            "inputs.q",
            "inputs.o",
            "vars.v",
            "vars.loopIndex",
            "memory.m",
            "tasks.t.output.k",
            "tasks.t.output.z",
            "inputs.zz",
        ]
    ),
    st.sampled_from(["", " ", "  "]),
    st.sampled_from(["", *_OPS]),
    st.sampled_from(["", " "]),
    st.one_of(
        st.sampled_from(["1", "1.0", "2", "2.5", "true", "null", "'x'", '"a==b"', "a==b", "x"]),
        st.text(alphabet="=!<>'\" ab1.0-", max_size=8),
    ),
)


@settings(max_examples=400, deadline=None)
@given(CONDITIONS)
def test_same_result_wherever_the_reference_is_not_confused(text: str) -> None:
    try:
        expected = _reference_condition(text, CONTEXT)
    except _Failed:
        return
    assert evaluate_condition(text, CONTEXT) is expected
    if text.startswith("${{"):
        inner = text[4:-3]
        if any(op in inner for op in _OPS) or inner.startswith("not "):
            assert render(text, CONTEXT) is expected


def test_reference_model_is_confused_where_we_are_not() -> None:
    text = "inputs.s != 'a==b'"
    try:
        _reference_condition(text, CONTEXT)
    except _Failed:
        pass
    else:
        raise AssertionError("the reference model should fail on this input")
    assert evaluate_condition(text, CONTEXT) is False
    assert math.isfinite(float(parse_literal("1e308")))
