"""Rewriting the paths inside templates: sub-workflow flattening (docs/compiler.md) and
``loop.output``.

The reference rewrites sub-workflow strings as plain text, so ``"see inputs.txt"`` or a key
named ``inputs`` in ``tasks.x.output.inputs.y`` changes too (docs/templates.md). Here only the
path of each template expression is rewritten; literal text, right-hand literals of conditions and
object keys stay as written. Everything else about the expression (spacing, operator,
literal) is kept byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentctl.spec.expressions import Expression, parse_condition, parse_expression
from agentctl.spec.template_exceptions import TemplateSyntaxError
from agentctl.spec.templates import OPEN, scan_templates

__all__ = [
    "PathMapper",
    "alias_loop_output",
    "rewrite_references",
    "rewrite_template_roots",
]

PathMapper = Callable[[tuple[str, ...]], tuple[str, ...]]
"""Maps a full path (root first) to its replacement; return it unchanged to keep it."""


def _new_path_text(expression: Expression, mapper: PathMapper) -> str:
    new_path = mapper(expression.path)
    return expression.path_text if new_path == expression.path else ".".join(new_path)


def _rewrite_condition(text: str, mapper: PathMapper) -> str:
    try:
        expression = parse_condition(text, check_roots=False)
    except TemplateSyntaxError:
        # Left as written: the compiler reports it with the user's own text.
        return text
    start = expression.path_offset
    end = start + len(expression.path_text)
    return text[:start] + _new_path_text(expression, mapper) + text[end:]


def _rewrite_string(text: str, mapper: PathMapper) -> str:
    if OPEN not in text:
        return text
    spans, _ = scan_templates(text)
    pieces: list[str] = []
    cursor = 0
    for span in spans:
        try:
            expression = parse_expression(span.text, span.text_offset, check_roots=False)
        except TemplateSyntaxError:
            continue
        start = expression.path_offset
        pieces.append(text[cursor:start])
        pieces.append(_new_path_text(expression, mapper))
        cursor = start + len(expression.path_text)
    pieces.append(text[cursor:])
    return "".join(pieces)


def rewrite_references(value: Any, mapper: PathMapper, *, condition: bool = False) -> Any:
    """A copy of ``value`` with every template path passed through ``mapper``.

    Walks lists and objects (keys untouched). With ``condition=True`` each string is read
    as a ``when``/``while`` condition, which may also be written without ``${{ }}``.
    Expressions that do not parse are left unchanged.
    """
    if isinstance(value, str):
        return _rewrite_condition(value, mapper) if condition else _rewrite_string(value, mapper)
    if isinstance(value, Mapping):
        return {
            key: rewrite_references(item, mapper, condition=condition)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [rewrite_references(item, mapper, condition=condition) for item in value]
    return value


def rewrite_template_roots(
    value: Any,
    *,
    inputs_to: str | None,
    memory_prefix: str | None,
    task_ids: Mapping[str, str],
    condition: bool = False,
) -> Any:
    """Namespace a sub-workflow's templates for invocation (docs/compiler.md).

    - ``inputs.K…`` → ``tasks.<inputs_to>.output.K…`` (``inputs_to`` is the input boundary id)
    - ``memory.K…`` → ``memory.<memory_prefix>K…``
    - ``tasks.<local>.…`` → ``tasks.<task_ids[local]>.…`` for the definition's own tasks

    ``None`` leaves that root alone. Paths that are only a root (``inputs``) or name a task
    that is not local are not rewritten.
    """

    def mapper(path: tuple[str, ...]) -> tuple[str, ...]:
        root = path[0]
        if root == "inputs" and inputs_to is not None and len(path) >= 2:
            return ("tasks", inputs_to, "output", *path[1:])
        if root == "memory" and memory_prefix is not None and len(path) >= 2:
            return ("memory", memory_prefix + path[1], *path[2:])
        if root == "tasks" and len(path) >= 3 and path[1] in task_ids:
            return ("tasks", task_ids[path[1]], *path[2:])
        return path

    return rewrite_references(value, mapper, condition=condition)


def alias_loop_output(text: str) -> str:
    """Replace the ``loop.output`` alias in a loop ``while`` with ``vars.loopPrevious``
    (docs/workflow-language.md).

    Done before any other check, like the reference; only a path that starts with
    ``loop.output`` is changed (a task or key that happens to be called ``loop`` is not).
    """

    def mapper(path: tuple[str, ...]) -> tuple[str, ...]:
        if path[:2] == ("loop", "output"):
            return ("vars", "loopPrevious", *path[2:])
        return path

    result: str = rewrite_references(text, mapper, condition=True)
    return result
