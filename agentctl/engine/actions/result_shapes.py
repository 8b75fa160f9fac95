"""What the builtin effects return, as a JSON Schema and an example, for the operator who
concludes an effect in doubt as *applied* and must supply the result the operation produced.

The shapes follow what ``builtin.py`` returns (``_shell``, ``_write``, ``_memory_write``);
a test rolls each action and checks its real result against its schema, so the two cannot
drift apart. Other operations (agents, protocol and extension actions) have no shape here:
their task's ``outputSchema`` is all that is known.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ResultShape", "result_shape"]

ResultShape = tuple[dict[str, Any], dict[str, Any]]

_STATUS = {"type": "string", "enum": ["changed", "unchanged"]}

_SHAPES: dict[str, ResultShape] = {
    "builtin.shell.exec": (
        {
            "type": "object",
            "required": ["status", "changed", "exitCode", "stdout", "stderr"],
            "properties": {
                "status": _STATUS,
                "changed": {"type": "boolean"},
                "exitCode": {"type": "integer"},
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
            },
        },
        {"status": "changed", "changed": True, "exitCode": 0, "stdout": "", "stderr": ""},
    ),
    "builtin.write": (
        {
            "type": "object",
            "required": ["status", "changed", "path", "after"],
            "properties": {
                "status": _STATUS,
                "changed": {"type": "boolean"},
                "path": {"type": "string"},
                "before": {"type": ["string", "null"]},
                "after": {"type": "string"},
                "diff": {"type": ["string", "null"]},
                "predictability": {"type": "string"},
            },
        },
        {
            "status": "changed",
            "changed": True,
            "path": "out/report.txt",
            "before": None,
            "after": "the content written",
            "diff": None,
            "predictability": "fully_predictable",
        },
    ),
    "builtin.memory.write": (
        {
            "type": "object",
            "required": ["status", "changed", "key"],
            "properties": {
                "status": _STATUS,
                "changed": {"type": "boolean"},
                "key": {"type": "string"},
                "before": {},
                "after": {},
            },
        },
        {"status": "changed", "changed": True, "key": "notes", "before": None, "after": "x"},
    ),
}


def result_shape(operation: str) -> ResultShape | None:
    """``(schema, example)`` of what ``operation`` returns, or None when it is not known."""
    return _SHAPES.get(operation)
