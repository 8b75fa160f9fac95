"""Templates written where nothing renders them (docs/templates.md, "Rendering").

An action's ``command``, ``args``, ``cwd`` and ``env`` are passed to the process exactly as
written, so ``args: ["${{ inputs.file }}"]`` hands the program the literal text
``${{ inputs.file }}``. That is what upstream does too, so it stays valid; ``check`` warns
(``invalid_template``, severity warning) naming the field and where templates are rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.compiler.drafts import Reporter, sub_path
from agentctl.spec.templates import walk_strings

__all__ = ["check_literal_templates"]

# Fields of an action handed to the process as written.
_LITERAL_ACTION_FIELDS = ("command", "args", "cwd", "env")


def check_literal_templates(spec: Mapping[str, Any], reporter: Reporter) -> None:
    for name, action in (spec.get("actions") or {}).items():
        if not isinstance(action, Mapping):
            continue
        for field in _LITERAL_ACTION_FIELDS:
            for location, text in walk_strings(action.get(field)):
                if "${{" not in text:
                    continue
                reporter.warning(
                    "invalid_template",
                    f"action `{name}` {field}{location} holds a template, but an action's "
                    f"{field} is passed to the process as written: it is never rendered",
                    sub_path("spec.actions", name, field) + location,
                    help="templates are rendered only in a task's `with`, `vars`, `outputs`, "
                    "router `select`, `compensate.with`, foreach items, matrix values and loop "
                    "`initial` (docs/templates.md); an action's command line is fixed, so have "
                    "an earlier task write the value to a file the command reads",
                )
