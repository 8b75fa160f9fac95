"""Errors of the template and condition language (docs/templates.md).

    TemplateError                  any template problem; carries expression, offset, location
    ├── TemplateSyntaxError        static: unclosed/empty ``${{ }}``, bad path, unknown root,
    │                              bad operator or literal  -> compiler ``invalid_template``
    ├── UndefinedValueError        run time: a path that does not exist ("undefined value")
    └── TemplateValueError         run time: a value of the wrong kind (an object in text,
                                   ``<`` on a non-number, a condition inside interpolation)

These are deliberately plain ``Exception`` subclasses, not ``AgentctlError``: a template
problem is a finding about a document or a task, and only the compiler (diagnostics) or the
engine (task failure) knows which one it is.
"""

from __future__ import annotations

import copy
from typing import Self

__all__ = [
    "TemplateError",
    "TemplateSyntaxError",
    "TemplateValueError",
    "UndefinedValueError",
]


class TemplateError(Exception):
    """A template could not be parsed or evaluated.

    ``expression`` is the offending expression text (trimmed, as written), ``offset`` the
    0-based character offset in the string where the problem was found, and ``location``
    the JSON-path suffix of that string inside the walked value (``"[0].cmd"``; ``""`` for
    the value itself).
    """

    def __init__(
        self,
        message: str,
        *,
        expression: str | None = None,
        offset: int | None = None,
        location: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression
        self.offset = offset
        self.location = location

    def __str__(self) -> str:
        if self.offset is None:
            return self.message
        return f"{self.message} (at offset {self.offset})"

    def at(self, location: str) -> Self:
        """A copy of this error located at ``location`` (a JSON-path suffix)."""
        located = copy.copy(self)
        located.location = location
        return located


class TemplateSyntaxError(TemplateError):
    """The template text is not valid; reported at compile time as ``invalid_template``."""


class UndefinedValueError(TemplateError):
    """A path names something that does not exist (distinct from an explicit ``null``)."""


class TemplateValueError(TemplateError):
    """A value exists but cannot be used the way the template asks."""
