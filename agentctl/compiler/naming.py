"""Generated task ids (docs/compiler.md): stable, content-addressed, upstream-identical.

Expanded children are ``PARENT--NNNN-HHHHHHHHHHHH``: the zero-padded index and the first
12 hex characters of SHA-256 over the compact JSON of the child's bindings. Only the
*top-level* keys of the bindings are sorted (upstream holds bindings in a sorted map but
builds ``serde_json`` with ``preserve_order``, so nested objects keep document order);
``json.dumps(..., sort_keys=True)`` would sort nested objects too and change the ids.

Sub-workflow invocations get an input boundary ``I--inputs-<8 hex>`` (8 hex of SHA-256 of
``name@version``), children ``I--<local id>`` and a memory/namespace prefix ``P`` (``I`` with
``-`` replaced by ``_``, then ``__``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "expansion_child_id",
    "foreach_bindings",
    "loop_bindings",
    "loop_previous_template",
    "matrix_bindings",
    "subworkflow_child_id",
    "subworkflow_input_id",
    "subworkflow_prefix",
]


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _compact(value: Any) -> str:
    return _COMPACT.encode(value)


def _sorted_top_level(bindings: Mapping[str, Any]) -> dict[str, Any]:
    return {key: bindings[key] for key in sorted(bindings)}


def expansion_child_id(parent: str, index: int, bindings: Mapping[str, Any]) -> str:
    """``PARENT--NNNN-<12 hex>`` for an expanded foreach/matrix/loop child."""
    encoded = _compact(_sorted_top_level(bindings)).encode("utf-8")
    return f"{parent}--{index:04d}-{hashlib.sha256(encoded).hexdigest()[:12]}"


def foreach_bindings(binding: str, item: Any, index: int) -> dict[str, Any]:
    """``{<as>: item, foreachIndex: i}`` with top-level keys in code-point order."""
    return _sorted_top_level({binding: item, "foreachIndex": index})


def matrix_bindings(combination: Mapping[str, Any], index: int) -> dict[str, Any]:
    """``{matrix: {axis: value…}, matrixIndex: i}``; axes are walked in sorted order."""
    return {
        "matrix": {axis: combination[axis] for axis in sorted(combination)},
        "matrixIndex": index,
    }


def loop_previous_template(previous_child_id: str) -> str:
    """The ``loopPrevious`` binding of iteration i > 0: the previous iteration's output."""
    return f"${{{{ tasks.{previous_child_id}.output }}}}"


def loop_bindings(index: int, previous: Any) -> dict[str, Any]:
    """``{loopIndex: i, loopPrevious: …}`` (``initial`` for i = 0, else a template)."""
    return {"loopIndex": index, "loopPrevious": previous}


def subworkflow_input_id(invocation: str, name: str, version: str) -> str:
    """``I--inputs-<8 hex>``: 8 hex of SHA-256 over the text ``name@version``."""
    identity = hashlib.sha256(f"{name}@{version}".encode()).hexdigest()[:8]
    return f"{invocation}--inputs-{identity}"


def subworkflow_child_id(invocation: str, local_id: str) -> str:
    """``I--<local id>``: a definition task's id inside one invocation."""
    return f"{invocation}--{local_id}"


def subworkflow_prefix(invocation: str) -> str:
    """``P``: the memory key / long-term namespace prefix isolating one invocation's state."""
    return invocation.replace("-", "_") + "__"
