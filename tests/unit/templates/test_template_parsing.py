"""Finding and parsing ``${{ … }}`` templates (docs/templates.md)."""

from __future__ import annotations

import pytest

from agentctl.spec.templates import (
    TemplateError,
    TemplateSyntaxError,
    TemplateValueError,
    UndefinedValueError,
    is_whole_template,
    parse_template,
    scan_templates,
)


def test_error_classes_are_plain_exceptions_under_template_error() -> None:
    for cls in (TemplateSyntaxError, UndefinedValueError, TemplateValueError):
        assert issubclass(cls, TemplateError)
    assert TemplateError.__mro__[1] is Exception


def test_text_without_templates_has_no_spans() -> None:
    template = parse_template("plain text with { braces } and $ signs")
    assert template.spans == ()
    assert not template.is_exact


def test_spans_record_offsets_and_trimmed_expressions() -> None:
    text = "a ${{ inputs.x }} b ${{vars.y}}"
    template = parse_template(text)
    assert [(s.start, s.end, s.expression.text) for s in template.spans] == [
        (2, 17, "inputs.x"),
        (20, 31, "vars.y"),
    ]
    assert text[template.spans[0].start : template.spans[0].end] == "${{ inputs.x }}"
    assert template.spans[0].expression.path_offset == 6


def test_expression_ends_at_the_first_closing_braces() -> None:
    template = parse_template("${{ inputs.a }}}")
    assert template.spans[0].end == 15
    assert not template.is_exact


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("${{ inputs.x }}", True),
        ("${{inputs.x}}", True),
        (" ${{ inputs.x }}", False),
        ("${{ inputs.x }} ", False),
        ("${{ inputs.x }}${{ inputs.y }}", False),
        ("x${{ inputs.x }}", False),
    ],
)
def test_exact_template_means_nothing_before_or_after(text: str, exact: bool) -> None:
    assert parse_template(text).is_exact is exact


@pytest.mark.parametrize(
    "path",
    [
        "inputs.name",
        "inputs.a.b-c.d_e.0",
        "vars.loopIndex",
        "memory.owner",
        "tasks.build.output",
        "tasks.build-1.output.items",
        "tasks.x.output.a.b.c",
    ],
)
def test_allowed_roots(path: str) -> None:
    expression = parse_template(f"${{{{ {path} }}}}").spans[0].expression
    assert expression.path_text == path
    assert expression.root == path.split(".")[0]
    assert not expression.is_condition


@pytest.mark.parametrize(
    ("text", "fragment", "offset"),
    [
        ("${{ inputs.x + 1 }}", "unexpected `+` after `inputs.x`", 13),
        ("${{ env.HOME }}", "unknown root `env`", 4),
        ("${{ tasks.a.items }}", "`tasks.<id>.output`", 4),
        ("${{ tasks.a }}", "`tasks.<id>.output`", 4),
        ("${{ inputs }}", "`inputs` needs a key", 4),
        ("${{ memory }}", "`memory` needs a key", 4),
        ("${{ inputs.items[0] }}", "indexing is not supported", 16),
        ("${{ inputs..a }}", "empty segment", 4),
        ("${{ inputs.a. }}", "empty segment", 4),
        ("${{ inputs.a b }}", "unexpected `b`", 13),
        ("${{ upper(inputs.a) }}", "unexpected `(`", 9),
        ("${{ inputs.a == }}", "`==` needs a right-hand side", 15),
        ("${{ inputs.a < 'z' }}", "`<` compares numbers", 14),
        ("${{ inputs.a >= true }}", "`>=` compares numbers", 15),
        ("${{ inputs.a == inputs.b + 1 }}", None, None),
        ("${{ 'x' == inputs.a }}", "expected a path", 4),
        ("${{ not not inputs.a }}", "unexpected `i` after `not`", 12),
        ("${{ Inputs.a }}", "unknown root `Inputs`", 4),
        ("${{ inputs.é }}", "unexpected `é`", 11),
    ],
)
def test_syntax_errors_name_the_expression_and_offset(
    text: str, fragment: str | None, offset: int | None
) -> None:
    if fragment is None:
        # A right-hand side is a literal, never an expression: this parses (as a string).
        expression = parse_template(text).spans[0].expression
        assert expression.literal == "inputs.b + 1"
        return
    with pytest.raises(TemplateSyntaxError) as caught:
        parse_template(text)
    error = caught.value
    assert fragment in str(error)
    assert error.offset == offset
    assert error.expression == text[4:-3]
    assert f"(at offset {offset})" in str(error)


def test_empty_template_is_an_error() -> None:
    with pytest.raises(TemplateSyntaxError, match="empty template expression") as caught:
        parse_template("ok ${{   }} ok")
    assert caught.value.offset == 3


def test_unclosed_template_is_an_error() -> None:
    with pytest.raises(TemplateSyntaxError, match="unclosed template expression") as caught:
        parse_template("value: ${{ inputs.x }")
    assert caught.value.offset == 7
    assert caught.value.expression == "${{ inputs.x }"


def test_nested_templates_are_not_supported() -> None:
    with pytest.raises(TemplateSyntaxError, match="unexpected `\\$`"):
        parse_template("${{ inputs.${{ inputs.k }} }}")


def test_first_error_in_text_order_is_raised() -> None:
    with pytest.raises(TemplateSyntaxError, match="unknown root `a`"):
        parse_template("${{ a.b }} ${{ inputs.x + 1 }} ${{")


def test_scan_stops_at_unclosed_but_keeps_earlier_spans() -> None:
    spans, error = scan_templates("${{ inputs.a }} and ${{ inputs.b")
    assert [s.text for s in spans] == ["inputs.a"]
    assert error is not None and error.offset == 20


def test_lone_dollar_and_braces_are_text() -> None:
    assert parse_template("$ {{ x }} ${ {x} } $${x}").spans == ()


def test_reference_whitespace_is_unicode_white_space_not_python_isspace() -> None:
    # U+00A0 is trimmed like the reference does; U+001F (Python-only whitespace) is not.
    assert parse_template("${{\u00a0inputs.a\u00a0}}").spans[0].expression.text == "inputs.a"
    with pytest.raises(TemplateSyntaxError):
        parse_template("${{\x1finputs.a}}")


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        ("${{ inputs.x }}", True),
        ("  ${{ inputs.x == 1 }}\n", True),
        ("${{ }}", True),
        ("x ${{ inputs.x }}", False),
        ("${{ a }}${{ b }}", False),
        ("${{ inputs.x", False),
        ("inputs.x", False),
        ("", False),
    ],
)
def test_is_whole_template_trims_then_requires_one_span(text: str, whole: bool) -> None:
    assert is_whole_template(text) is whole


def test_parse_template_is_cached_and_immutable() -> None:
    assert parse_template("${{ inputs.cached }}") is parse_template("${{ inputs.cached }}")
