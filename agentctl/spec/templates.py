"""``${{ … }}`` templates in workflow strings: finding, checking and rendering them
(docs/templates.md).

A string is scanned for ``${{``; the expression runs to the next ``}}`` and is trimmed.
A string that is exactly one template (nothing before or after, not even whitespace) keeps
the JSON type of its value — or, if the expression is a condition, becomes a boolean.
Anything else is interpolation: each template must yield a scalar, written as JSON text.

The compiler uses ``find_references``/``template_errors`` for static checks (docs/templates.md); the
engine uses ``render`` and ``evaluate_condition``. Nothing here does I/O or runs code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from agentctl.spec.expressions import (
    Expression,
    TemplateContext,
    evaluate_condition,
    evaluate_expression,
    evaluate_value,
    parse_condition,
    parse_expression,
)
from agentctl.spec.template_exceptions import (
    TemplateError,
    TemplateSyntaxError,
    TemplateValueError,
    UndefinedValueError,
)
from agentctl.spec.template_values import WHITESPACE, copy_json, is_truthy, json_equal, json_text

__all__ = [
    "CLOSE",
    "OPEN",
    "Copies",
    "Expression",
    "RawSpan",
    "Reference",
    "Span",
    "Template",
    "TemplateContext",
    "TemplateError",
    "TemplateSyntaxError",
    "TemplateValueError",
    "UndefinedValueError",
    "evaluate_condition",
    "find_references",
    "is_truthy",
    "is_whole_template",
    "json_equal",
    "parse_condition",
    "parse_template",
    "render",
    "scan_templates",
    "template_errors",
    "walk_strings",
]

OPEN = "${{"
CLOSE = "}}"
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SHOWN_UNCLOSED = 40

#: Values :func:`render` returns as they are, without looking further (exact types).
_SCALARS = frozenset({int, float, bool, type(None)})

#: What :func:`render` notes when asked: ``(copy, original, expression)`` for each object or
#: array a template read whole from the context.
Copies = list[tuple[Any, Any, Expression]]


@dataclass(frozen=True, slots=True)
class RawSpan:
    """One ``${{ … }}`` as found in the text, before its expression is parsed."""

    start: int
    end: int
    text: str
    text_offset: int


@dataclass(frozen=True, slots=True)
class Span:
    """One parsed template: ``source[start:end]`` is ``${{ … }}``."""

    start: int
    end: int
    expression: Expression


@dataclass(frozen=True, slots=True)
class Reference:
    """A path a template reads, for static checks (docs/templates.md).

    ``path`` is what follows the root: ``("name",)`` for ``inputs.name``,
    ``("build", "output", "digest")`` for ``tasks.build.output.digest``. ``location`` is the
    JSON-path suffix of the string inside the walked value and ``offset`` the position of
    the path inside that string.
    """

    root: str
    path: tuple[str, ...]
    text: str
    expression: str
    location: str = ""
    offset: int = 0

    @property
    def task_id(self) -> str | None:
        """The task id for ``tasks.ID.output…``; ``None`` for other roots."""
        return self.path[0] if self.root == "tasks" else None

    @property
    def key(self) -> str:
        """The first segment after the root (input name, var, memory key or task id)."""
        return self.path[0]


@dataclass(frozen=True, slots=True)
class Template:
    """A string with its templates parsed; cheap to render many times."""

    source: str
    spans: tuple[Span, ...]
    #: The whole string is one template (:attr:`is_exact`), decided once when parsed.
    exact: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        spans = self.spans
        exact = len(spans) == 1 and spans[0].start == 0 and spans[0].end == len(self.source)
        object.__setattr__(self, "exact", exact)

    @property
    def is_exact(self) -> bool:
        """True when the whole string is one template, so its value keeps its JSON type."""
        return self.exact

    @property
    def expressions(self) -> tuple[Expression, ...]:
        return tuple(span.expression for span in self.spans)

    def render(self, context: TemplateContext, copies: Copies | None = None) -> Any:
        """The value of this string in ``context`` (see the module docstring). A value read
        whole (the string is one path) is a copy; with ``copies``, each object or array
        copied is noted there as ``(copy, original, expression)``."""
        if not self.spans:
            return self.source
        if self.exact:
            expression = self.spans[0].expression
            if expression.is_condition:
                return evaluate_expression(expression, context)
            value = evaluate_value(expression, context)
            copied = copy_json(value)
            if copies is not None and copied is not value:
                copies.append((copied, value, expression))
            return copied
        pieces: list[str] = []
        cursor = 0
        for span in self.spans:
            pieces.append(self.source[cursor : span.start])
            pieces.append(_interpolate(span.expression, context))
            cursor = span.end
        pieces.append(self.source[cursor:])
        return "".join(pieces)


def _interpolate(expression: Expression, context: TemplateContext) -> str:
    if expression.is_condition:
        raise TemplateValueError(
            f"unsupported expression `{expression.text}`: a condition is evaluated only when "
            "the template is the whole string (nothing before or after `${{ … }}`)",
            expression=expression.text,
            offset=expression.offset,
        )
    value = evaluate_value(expression, context)
    if isinstance(value, list | Mapping):
        raise TemplateValueError(
            f"embedded object or array `{expression.text}` cannot be rendered into text; "
            "make the template the whole string to keep its type",
            expression=expression.text,
            offset=expression.offset,
        )
    return json_text(value)


def scan_templates(text: str) -> tuple[list[RawSpan], TemplateSyntaxError | None]:
    """Every ``${{ … }}`` in ``text``, left to right, and the unclosed-template error if any.

    Scanning stops at an unclosed ``${{``; the spans before it are still returned.
    """
    spans: list[RawSpan] = []
    cursor = 0
    while (start := text.find(OPEN, cursor)) != -1:
        inner = start + len(OPEN)
        close = text.find(CLOSE, inner)
        if close == -1:
            shown = text[start : start + _SHOWN_UNCLOSED]
            return spans, TemplateSyntaxError(
                f"unclosed template expression: `{shown}` has no closing `}}}}`",
                expression=text[start:],
                offset=start,
            )
        raw = text[inner:close]
        lead = len(raw) - len(raw.lstrip(WHITESPACE))
        spans.append(RawSpan(start, close + len(CLOSE), raw.strip(WHITESPACE), inner + lead))
        cursor = close + len(CLOSE)
    return spans, None


def _analyse(text: str) -> tuple[tuple[Span, ...], list[TemplateError]]:
    raw_spans, unclosed = scan_templates(text)
    spans: list[Span] = []
    errors: list[TemplateError] = []
    for raw in raw_spans:
        if not raw.text:
            errors.append(
                TemplateSyntaxError(
                    "empty template expression `${{ }}`", expression="", offset=raw.start
                )
            )
            continue
        try:
            expression = parse_expression(raw.text, raw.text_offset)
        except TemplateSyntaxError as error:
            errors.append(error)
            continue
        spans.append(Span(raw.start, raw.end, expression))
    if unclosed is not None:
        errors.append(unclosed)
    return tuple(spans), errors


def _parse(text: str) -> Template:
    spans, errors = _analyse(text)
    if errors:
        raise errors[0]
    return Template(text, spans)


# The engine renders the same plan strings for every task attempt; only short strings are
# cached so the cache stays small whatever the documents hold.
_parse_cached = lru_cache(maxsize=2048)(_parse)
_CACHED_LENGTH = 4096


def parse_template(text: str) -> Template:
    """Parse every template in ``text``; raises the first ``TemplateSyntaxError`` found."""
    return _parse_cached(text) if len(text) <= _CACHED_LENGTH else _parse(text)


def is_whole_template(text: str) -> bool:
    """The compile-time shape check for router ``select`` and loop ``while``.

    True when ``text``, once surrounding whitespace is trimmed, is exactly one
    ``${{ … }}``. (Rendering does not trim: a ``select`` of ``" ${{ x }}"`` passes this
    check but renders as interpolation, i.e. a string — as in the reference.)
    """
    trimmed = text.strip(WHITESPACE)
    spans, unclosed = scan_templates(trimmed)
    return (
        unclosed is None
        and len(spans) == 1
        and spans[0].start == 0
        and spans[0].end == len(trimmed)
    )


def _key_location(key: object) -> str:
    if isinstance(key, str) and _PLAIN_KEY.fullmatch(key):
        return f".{key}"
    return f"[{json.dumps(key, ensure_ascii=False)}]"


def walk_strings(value: Any, location: str = "") -> Iterator[tuple[str, str]]:
    """``(location, string)`` for every string in a JSON value, in document order.

    Object keys are not visited: they are never rendered.
    """
    if isinstance(value, str):
        yield location, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from walk_strings(item, location + _key_location(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk_strings(item, f"{location}[{index}]")


def find_references(value: Any) -> list[Reference]:
    """Every path read by a template anywhere in ``value`` (strings, lists, objects).

    Only text inside ``${{ }}`` counts. Raises the first ``TemplateSyntaxError``, located
    with ``.location``; use ``template_errors`` to collect them all instead.
    """
    references: list[Reference] = []
    for location, text in walk_strings(value):
        if OPEN not in text:
            continue
        try:
            template = parse_template(text)
        except TemplateError as error:
            raise error.at(location) from None
        for expression in template.expressions:
            references.append(
                Reference(
                    root=expression.root,
                    path=expression.path[1:],
                    text=expression.path_text,
                    expression=expression.text,
                    location=location,
                    offset=expression.path_offset,
                )
            )
    return references


def template_errors(value: Any) -> list[tuple[str, TemplateError]]:
    """``(location, error)`` for every syntax error in every string of ``value``; never raises.

    Each template in a string is checked on its own, so one bad template does not hide the
    next (scanning does stop at an unclosed ``${{``).
    """
    found: list[tuple[str, TemplateError]] = []
    for location, text in walk_strings(value):
        if OPEN not in text:
            continue
        _, errors = _analyse(text)
        found.extend((location, error.at(location)) for error in errors)
    return found


def _render(value: Any, context: TemplateContext, copies: Copies | None) -> Any:
    # An error's location is built on its way out (each level adds its key), so rendering
    # that succeeds never formats a location; it runs twice per task attempt. A number, a
    # boolean or null (exactly those types) is returned before the ABC checks below.
    if type(value) in _SCALARS:
        return value
    if isinstance(value, str):
        if OPEN not in value:
            return value
        try:
            return parse_template(value).render(context, copies)
        except TemplateError as error:
            raise error.at("") from None
    if type(value) is dict or isinstance(value, Mapping):
        rendered = {}
        for key, item in value.items():
            try:
                rendered[key] = _render(item, context, copies)
            except TemplateError as error:
                raise error.at(_key_location(key) + error.location) from None
        return rendered
    if isinstance(value, list):
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_render(item, context, copies))
            except TemplateError as error:
                raise error.at(f"[{index}]{error.location}") from None
        return items
    return value


def render(value: Any, context: TemplateContext, copies: Copies | None = None) -> Any:
    """Render every string in ``value`` (recursively through lists and objects).

    Keys are kept as they are and non-string scalars are copied. Errors are located with
    ``.location``. A value without templates comes back equal to itself. ``copies``, when
    given, collects the objects and arrays read whole from the context, each with the one
    it copies (:meth:`Template.render`): a caller that knows the original's canonical text
    need not encode the copy again.
    """
    return _render(value, context, copies)
