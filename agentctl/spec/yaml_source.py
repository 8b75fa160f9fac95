"""YAML text -> plain JSON-like values plus a source map (docs/workflow-language.md).

Typing follows the YAML 1.2 core schema, as upstream's loader does: only ``true``/``false``
(also ``True``/``TRUE``/``False``/``FALSE``) are booleans, ``null``/``Null``/``NULL``/``~``
and the empty scalar are null, integers and floats use the core patterns, and everything
else — ``yes``, ``on``, ``2025-11-25``, ``1_000`` — stays a string. PyYAML composes the node
events (libyaml's C parser when available); values are built here, iteratively, so that
every node's position, duplicate keys and the original text of plain non-string scalars are
known, and so that no nesting depth can exhaust the stack.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from agentctl.spec.source_map import join_path

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "ParsedYaml",
    "YamlProblem",
    "parse_yaml",
    "well_formed_text",
]

MAX_DEPTH = 128
"""Deepest nesting accepted; real workflows stay far below it."""

MAX_NODES = 1_000_000
"""Most nodes after alias expansion; stops "billion laughs" documents."""

_TAG = "tag:yaml.org,2002:"
_NULL, _BOOL, _INT, _FLOAT, _STR = (_TAG + t for t in ("null", "bool", "int", "float", "str"))
_SEQ, _MAP = _TAG + "seq", _TAG + "map"

_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_ParserLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def well_formed_text(text: str) -> str | None:
    """``text`` with escaped UTF-16 surrogate pairs joined (``"\\ud83d\\ude00"`` is one
    character in JSON and YAML), or ``None`` when a lone surrogate is left, which no UTF-8
    output — JSON, SQLite, a terminal — can carry."""
    if _SURROGATE_RE.search(text) is None:
        return text
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return None if _SURROGATE_RE.search(joined) else joined


class YamlProblem(Exception):
    """Why a text could not become a document; ``code`` is the diagnostic code."""

    def __init__(self, code: str, message: str, line: int | None, column: int | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line
        self.column = column


@dataclass
class ParsedYaml:
    """The parsed value and, per path, its position and the text of plain non-strings."""

    value: Any
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    scalar_text: dict[str, str] = field(default_factory=dict)


def _position(mark: Any) -> tuple[int, int] | None:
    return None if mark is None else (mark.line + 1, mark.column + 1)


def _problem(code: str, message: str, mark: Any) -> YamlProblem:
    pos = _position(mark)
    return YamlProblem(code, message, *(pos if pos is not None else (None, None)))


def parse_yaml(text: str) -> ParsedYaml:
    """Parse one YAML document; raises :class:`YamlProblem` for anything unusable."""
    parsed = ParsedYaml(value=None)
    builder = _Builder(parsed)
    loader: Any = None
    try:
        loader = _ParserLoader(text)
        while not builder.done:
            builder.feed(loader.get_event())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = " ".join(p for p in (exc.context, exc.problem) if p)
        raise _problem("yaml_syntax", f"invalid YAML: {detail}", mark) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise YamlProblem(
            "yaml_syntax", f"invalid YAML: {exc.reason} (#x{exc.character:04x})", line, column
        ) from None
    except yaml.YAMLError as exc:
        raise YamlProblem("yaml_syntax", f"invalid YAML: {exc}", None, None) from None
    finally:
        if loader is not None:
            loader.dispose()
    return parsed


@dataclass
class _Frame:
    """An open mapping or sequence while its events arrive."""

    value: dict[str, Any] | list[Any]
    path: str
    anchor: str | None
    nodes_before: int
    key: str | None = None
    key_marks: dict[str, Any] = field(default_factory=dict)


class _Builder:
    """Builds values from parser events with an explicit stack (no recursion)."""

    def __init__(self, parsed: ParsedYaml) -> None:
        self.parsed = parsed
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int, str | None]] = {}
        self.open_anchors: set[str] = set()
        self.nodes = 0
        self.documents = 0
        self.done = False

    def feed(self, event: Any) -> None:
        if event is None or isinstance(event, yaml.StreamEndEvent):
            self.done = True
        elif isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise _problem(
                    "yaml_syntax",
                    "invalid YAML: expected a single document, found another one",
                    event.start_mark,
                )
        elif isinstance(event, yaml.ScalarEvent):
            self._scalar(event)
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event)
        elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            self._start(event)
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            self._end()

    # --- placing values ---------------------------------------------------------------------

    def _count(self, nodes: int, mark: Any) -> None:
        self.nodes += nodes
        if self.nodes > MAX_NODES:
            raise _problem(
                "schema_violation",
                f"the document expands to more than {MAX_NODES} nodes (aliases included)",
                mark,
            )

    def _child_path(self, event: Any) -> str | None:
        """Path of the node this event starts; ``None`` when it is a mapping key."""
        if not self.stack:
            self.parsed.positions[""] = _position(event.start_mark) or (1, 1)
            return ""
        frame = self.stack[-1]
        if isinstance(frame.value, list):
            path = join_path(frame.path, len(frame.value))
            self.parsed.positions.setdefault(path, _position(event.start_mark) or (1, 1))
            return path
        if frame.key is None:
            return None
        return join_path(frame.path, frame.key)

    def _place(self, value: Any) -> None:
        if not self.stack:
            self.parsed.value = value
            return
        frame = self.stack[-1]
        if isinstance(frame.value, list):
            frame.value.append(value)
        else:
            assert frame.key is not None
            frame.value[frame.key] = value
            frame.key = None

    def _key(self, event: yaml.ScalarEvent) -> None:
        frame = self.stack[-1]
        tag = _scalar_tag(event)
        if tag not in (_STR, _NULL, _BOOL, _INT, _FLOAT):
            raise _problem("yaml_syntax", f"unsupported YAML tag `{tag}`", event.start_mark)
        # JSON object keys are strings: a key written `1` or `true` means the text.
        key = _text(event)
        first = frame.key_marks.get(key)
        if first is not None:
            raise _problem(
                "yaml_syntax",
                f"duplicate key `{key}` (first defined at line {first.line + 1})",
                event.start_mark,
            )
        frame.key_marks[key] = event.start_mark
        frame.key = key
        path = join_path(frame.path, key)
        self.parsed.positions.setdefault(path, _position(event.start_mark) or (1, 1))

    # --- events -----------------------------------------------------------------------------

    def _scalar(self, event: yaml.ScalarEvent) -> None:
        self._count(1, event.start_mark)
        path = self._child_path(event)
        if path is None:
            self._key(event)
            return
        value, text = _scalar_value(event)
        if text is not None:
            self.parsed.scalar_text[path] = text
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, 1, text)
        self._place(value)

    def _alias(self, event: yaml.AliasEvent) -> None:
        path = self._child_path(event)
        if path is None:
            raise _problem("yaml_syntax", "a mapping key must be a plain value", event.start_mark)
        anchor = str(event.anchor)
        if anchor in self.open_anchors:
            raise _problem("yaml_syntax", "invalid YAML: recursive alias", event.start_mark)
        if anchor not in self.anchors:
            raise _problem(
                "yaml_syntax", f"invalid YAML: unknown alias `{anchor}`", event.start_mark
            )
        value, nodes, text = self.anchors[anchor]
        self._count(nodes, event.start_mark)
        if text is not None:
            self.parsed.scalar_text[path] = text
        self._place(value)

    def _start(self, event: yaml.MappingStartEvent | yaml.SequenceStartEvent) -> None:
        self._count(1, event.start_mark)
        path = self._child_path(event)
        if path is None:
            raise _problem("yaml_syntax", "a mapping key must be a plain value", event.start_mark)
        mapping = isinstance(event, yaml.MappingStartEvent)
        expected = _MAP if mapping else _SEQ
        if event.tag not in (None, "!", expected):
            raise _problem("yaml_syntax", f"unsupported YAML tag `{event.tag}`", event.start_mark)
        if len(self.stack) >= MAX_DEPTH:
            raise _problem(
                "schema_violation",
                f"the document is nested more than {MAX_DEPTH} levels deep",
                event.start_mark,
            )
        value: dict[str, Any] | list[Any] = {} if mapping else []
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        self.stack.append(_Frame(value, path, event.anchor, self.nodes))

    def _end(self) -> None:
        frame = self.stack.pop()
        if frame.anchor is not None:
            self.open_anchors.discard(frame.anchor)
            self.anchors[frame.anchor] = (frame.value, self.nodes - frame.nodes_before + 1, None)
        self._place(frame.value)


def _text(event: yaml.ScalarEvent) -> str:
    text = well_formed_text(str(event.value))
    if text is None:
        raise _problem(
            "yaml_syntax", "invalid YAML: a string holds a lone UTF-16 surrogate", event.start_mark
        )
    return text


def _scalar_tag(event: yaml.ScalarEvent) -> str:
    """The core-schema tag of a scalar: explicit, else resolved like YAML 1.2 core."""
    if event.tag not in (None, "!"):
        return str(event.tag)
    plain = event.implicit[0] and event.tag is None
    if not plain:
        return _STR
    text = str(event.value)
    if _BOOL_RE.fullmatch(text):
        return _BOOL
    if _NULL_RE.fullmatch(text):
        return _NULL
    if _INT_RE.fullmatch(text):
        return _INT
    if _FLOAT_RE.fullmatch(text):
        return _FLOAT
    return _STR


def _scalar_value(event: yaml.ScalarEvent) -> tuple[Any, str | None]:
    """The value, and the original text when a plain scalar became a bool or a number."""
    tag = _scalar_tag(event)
    text = _text(event)
    if tag == _STR:
        return text, None
    original = text if event.tag is None else None
    if tag == _NULL:
        return None, None
    if tag == _BOOL:
        if text.lower() not in ("true", "false"):
            raise _problem("yaml_syntax", f"`{text}` is not a boolean", event.start_mark)
        return text.lower() == "true", original
    if tag == _INT:
        return _to_int(text, event), original
    if tag == _FLOAT:
        return _to_float(text, event), original
    raise _problem("yaml_syntax", f"unsupported YAML tag `{tag}`", event.start_mark)


def _to_int(text: str, node: yaml.ScalarEvent) -> int:
    try:
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)
    except ValueError:
        raise _problem(
            "yaml_syntax", f"`{text[:40]}` is not a usable integer", node.start_mark
        ) from None


def _to_float(text: str, node: yaml.ScalarEvent) -> float:
    # `.inf` / `.nan` (any sign, any case) are YAML's spellings; JSON cannot hold them.
    if _FLOAT_RE.fullmatch(text) is None:
        if _INT_RE.fullmatch(text) is not None:
            try:
                return float(_to_int(text, node))
            except OverflowError:
                raise _problem(
                    "schema_violation", f"`{text[:40]}` is too large", node.start_mark
                ) from None
        raise _problem("yaml_syntax", f"`{text[:40]}` is not a number", node.start_mark)
    finite = text.lstrip("+-").lower() not in (".inf", ".nan")
    value = float(text) if finite else math.nan
    if not math.isfinite(value):
        raise _problem(
            "schema_violation",
            f"`{text[:40]}` is not a finite number; JSON has no infinities or NaN",
            node.start_mark,
        )
    return value
