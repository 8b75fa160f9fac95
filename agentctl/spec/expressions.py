"""Expressions inside ``${{ }}``: paths and the tiny condition language (docs/templates.md).

An expression is ``[not ] PATH [OP LITERAL]``. A path is dot-separated segments of
``[A-Za-z0-9_-]`` under one of four roots — ``inputs.K``, ``vars.K``, ``memory.K``,
``tasks.ID.output`` (or ``tasks.ID.artifacts.NAME`` for a task's named artifacts) — and
descends through objects only: no indexing, arithmetic, functions, path-to-path comparison
or nesting.

The reference finds the operator by searching the whole text for ``==`` first, then ``!=``,
``<=``, ``>=``, ``<``, ``>``, splitting at the first occurrence (docs/templates.md), so a right-hand
literal holding an operator confuses it. Here the text is scanned left to right instead:
the path, then the operator right after it, then everything else is the literal. For every
expression the reference evaluates without error the result is the same; expressions it
got wrong (``inputs.x != 'a==b'``) now mean what they say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentctl.spec.template_exceptions import (
    TemplateSyntaxError,
    TemplateValueError,
    UndefinedValueError,
)
from agentctl.spec.template_values import (
    WHITESPACE,
    is_json_number,
    is_truthy,
    json_equal,
    parse_literal,
)

__all__ = [
    "OPERATORS",
    "ROOTS",
    "Expression",
    "TemplateContext",
    "evaluate_condition",
    "evaluate_expression",
    "evaluate_value",
    "parse_condition",
    "parse_expression",
    "type_name",
]

ROOTS = ("inputs", "vars", "memory", "tasks")
# Two-character operators first, so `<=` is never read as `<` followed by `=`.
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")
_ORDERING = frozenset({"<", "<=", ">", ">="})
_SEGMENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_PATH_CHARS = _SEGMENT_CHARS | {"."}
_NOT = "not "
_OPEN = "${{"
_CLOSE = "}}"
_ROOT_HELP = (
    "paths start with inputs.<key>, vars.<key>, memory.<key>, tasks.<id>.output or "
    "tasks.<id>.artifacts.<name>"
)


@dataclass(frozen=True, slots=True)
class Expression:
    """One parsed expression, with offsets into the string it came from.

    ``path`` holds every segment, root first (``("tasks", "build", "output", "digest")``).
    ``literal`` is the parsed right-hand side (meaningful only when ``operator`` is set).
    """

    text: str
    offset: int
    negated: bool
    path: tuple[str, ...]
    path_offset: int
    operator: str | None = None
    right_text: str | None = None
    literal: Any = None

    @property
    def root(self) -> str:
        return self.path[0]

    @property
    def path_text(self) -> str:
        return ".".join(self.path)

    @property
    def is_condition(self) -> bool:
        """True when the expression is a test (``not`` or an operator), not a plain path."""
        return self.negated or self.operator is not None


@dataclass(frozen=True)
class TemplateContext:
    """What templates can read.

    ``tasks`` maps a task id to its recorded output; a task without an output (failed,
    cancelled, skipped because of a dependency, not run yet) is simply absent, which makes
    ``tasks.ID.output`` an undefined value rather than ``null``. ``artifacts`` maps a task
    id to its named artifacts' versions recorded in this run (``{name: {digest, version,
    path, size}}``); it is not part of :meth:`as_json`, so condition records of workflows
    that declare no artifacts keep their digests.
    """

    inputs: Mapping[str, Any] = field(default_factory=dict)
    vars: Mapping[str, Any] = field(default_factory=dict)
    memory: Mapping[str, Any] = field(default_factory=dict)
    tasks: Mapping[str, Any] = field(default_factory=dict)
    artifacts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def root(self, name: str) -> Mapping[str, Any]:
        """The mapping behind ``inputs``, ``vars``, ``memory`` or ``tasks``."""
        roots: dict[str, Mapping[str, Any]] = {
            "inputs": self.inputs,
            "vars": self.vars,
            "memory": self.memory,
            "tasks": self.tasks,
        }
        return roots[name]

    def as_json(self) -> dict[str, Any]:
        """``{inputs, vars, memory, tasks}``: the object a ``when`` skip record digests.

        The reference holds each of the four in a sorted map, so their keys come out
        sorted; nested objects keep their own order.
        """
        return {name: dict(sorted(self.root(name).items())) for name in ROOTS}


def _syntax(text: str, offset: int, why: str) -> TemplateSyntaxError:
    return TemplateSyntaxError(
        f"unsupported expression `{text}`: {why}", expression=text, offset=offset
    )


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in WHITESPACE:
        pos += 1
    return pos


def _check_root(text: str, offset: int, path: tuple[str, ...]) -> None:
    root = path[0]
    if root in ("inputs", "vars", "memory"):
        if len(path) < 2:
            raise _syntax(text, offset, f"`{root}` needs a key: `{root}.<key>`")
    elif root == "tasks":
        if len(path) >= 3 and path[2] == "artifacts":
            if len(path) < 4:
                raise _syntax(
                    text, offset, "a named artifact is read as `tasks.<id>.artifacts.<name>`"
                )
        elif len(path) < 3 or path[2] != "output":
            raise _syntax(
                text,
                offset,
                "a task is read as `tasks.<id>.output` (then optional keys) or "
                "`tasks.<id>.artifacts.<name>.digest|version|path|size`",
            )
    else:
        raise _syntax(text, offset, f"unknown root `{root}`; {_ROOT_HELP}")


def parse_expression(text: str, offset: int = 0, *, check_roots: bool = True) -> Expression:
    """Parse one trimmed expression; ``offset`` is where it starts in its source string.

    With ``check_roots=False`` only the shape is checked (used to rewrite paths whose root
    is about to change, such as the ``loop.output`` alias).
    """
    if not text:
        raise TemplateSyntaxError("empty template expression", expression=text, offset=offset)
    pos = 0
    negated = text.startswith(_NOT)
    if negated:
        pos = _skip_space(text, len(_NOT))
    path_start = pos
    while pos < len(text) and text[pos] in _PATH_CHARS:
        pos += 1
    path_text = text[path_start:pos]
    if not path_text:
        raise _syntax(text, offset + path_start, f"expected a path; {_ROOT_HELP}")
    path = tuple(path_text.split("."))
    operator: str | None = None
    right_text: str | None = None
    literal: Any = None
    pos = _skip_space(text, pos)
    if pos < len(text):
        operator = next((op for op in OPERATORS if text.startswith(op, pos)), None)
        if operator is None:
            raise _syntax(text, offset + pos, _unexpected(text[pos], path_text))
        right_start = pos + len(operator)
        right_text = text[right_start:].strip(WHITESPACE)
        if not right_text:
            raise _syntax(text, offset + right_start, f"`{operator}` needs a right-hand side")
        literal = parse_literal(right_text)
        if operator in _ORDERING and not is_json_number(literal):
            raise _syntax(
                text,
                offset + right_start,
                f"`{operator}` compares numbers; the right-hand side `{right_text}` is not a "
                "number",
            )
    # Segments and roots last, so a malformed expression is reported for its shape first.
    if "" in path:
        raise _syntax(text, offset + path_start, f"path `{path_text}` has an empty segment")
    if check_roots:
        _check_root(text, offset + path_start, path)
    return Expression(
        text=text,
        offset=offset,
        negated=negated,
        path=path,
        path_offset=offset + path_start,
        operator=operator,
        right_text=right_text,
        literal=literal,
    )


def _unexpected(found: str, path_text: str) -> str:
    if found == "[":
        return "indexing is not supported; paths descend through objects only"
    return (
        f"unexpected `{found}` after `{path_text}`; only ==, !=, <, <=, > or >= and a literal "
        "may follow a path (no arithmetic, functions or indexing)"
    )


def _unwrap_condition(text: str) -> tuple[str, int]:
    """The condition text of a ``when``/``while`` and its offset in ``text``.

    Surrounding whitespace is ignored, and one ``${{ … }}`` wrapping the whole text is
    removed; a bare condition (no wrapper) is taken as it is.
    """
    start = len(text) - len(text.lstrip(WHITESPACE))
    trimmed = text.strip(WHITESPACE)
    if trimmed.startswith(_OPEN) and trimmed[len(_OPEN) :].endswith(_CLOSE):
        raw = trimmed[len(_OPEN) : len(trimmed) - len(_CLOSE)]
        inner_start = start + len(_OPEN) + len(raw) - len(raw.lstrip(WHITESPACE))
        return raw.strip(WHITESPACE), inner_start
    return trimmed, start


def parse_condition(text: str, *, check_roots: bool = True) -> Expression:
    """Parse a ``when`` or loop ``while`` text, written with or without ``${{ }}``."""
    inner, offset = _unwrap_condition(text)
    return parse_expression(inner, offset, check_roots=check_roots)


def _undefined(expression: Expression, why: str) -> UndefinedValueError:
    return UndefinedValueError(
        f"undefined value `{expression.path_text}`: {why}",
        expression=expression.text,
        offset=expression.path_offset,
    )


def evaluate_value(expression: Expression, context: TemplateContext) -> Any:
    """The value the expression's path points at (not a copy).

    Raises ``UndefinedValueError`` when any step is missing or descends into a non-object.
    """
    path = expression.path
    # Cheap, and keeps expressions parsed with `check_roots=False` from reading nonsense.
    _check_root(expression.text, expression.path_offset, path)
    value: Any
    root = path[0]
    if root == "tasks" and path[2] == "artifacts":
        task_id, name = path[1], path[3]
        recorded = context.artifacts.get(task_id, {})
        if name not in recorded:
            raise _undefined(
                expression, f"task `{task_id}` has recorded no version of artifact `{name}`"
            )
        value = recorded[name]
        rest = path[4:]
    elif root == "tasks":
        task_id = path[1]
        try:
            value = context.tasks[task_id]
        except KeyError:
            raise _undefined(expression, f"task `{task_id}` has no recorded output") from None
        rest = path[3:]
    else:
        # inputs, vars or memory (checked above): the context's field of that name.
        found: Mapping[str, Any] = getattr(context, root)
        if path[1] not in found:
            raise _undefined(expression, f"`{root}` has no key `{path[1]}`")
        value = found[path[1]]
        rest = path[2:]
    for segment in rest:
        if not (type(value) is dict or isinstance(value, Mapping)):
            raise _undefined(expression, f"cannot read `{segment}` from a non-object value")
        if segment not in value:
            raise _undefined(expression, f"no key `{segment}`")
        value = value[segment]
    return value


def _compare(expression: Expression, left: Any) -> bool:
    operator = expression.operator
    right = expression.literal
    if operator == "==":
        return json_equal(left, right)
    if operator == "!=":
        return not json_equal(left, right)
    if not is_json_number(left):
        raise TemplateValueError(
            f"unsupported expression `{expression.text}`: `{operator}` needs a number, "
            f"but `{expression.path_text}` is {type_name(left)}",
            expression=expression.text,
            offset=expression.path_offset,
        )
    # The reference compares as 64-bit floats; so do we, to give the same answers.
    a, b = _as_float(left), _as_float(right)
    if operator == "<":
        return a < b
    if operator == "<=":
        return a <= b
    if operator == ">":
        return a > b
    return a >= b


def _as_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def type_name(value: Any) -> str:
    """A JSON type name for messages: ``null``, ``a boolean``, ``a string`` …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if is_json_number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def evaluate_expression(expression: Expression, context: TemplateContext) -> bool:
    """The boolean result of an expression used as a condition.

    With an operator, the comparison; without one, the truthiness of the path's value;
    ``not`` negates either.
    """
    left = evaluate_value(expression, context)
    result = is_truthy(left) if expression.operator is None else _compare(expression, left)
    return not result if expression.negated else result


def evaluate_condition(text: str, context: TemplateContext) -> bool:
    """Evaluate a ``when`` or loop ``while`` (with or without the surrounding ``${{ }}``).

    A missing path, a bad expression or ``<`` on a non-number raises ``TemplateError``;
    an error is never read as false.
    """
    return evaluate_expression(parse_condition(text), context)
