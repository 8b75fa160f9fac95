"""The run page's JSON blocks (``views.pretty``): indented when they fit, else compact and
cut, written only as far as shown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentctl.web import views


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


@pytest.mark.parametrize(
    "value",
    [
        {"b": [1, 2.5, None, True], "a": {"é": 'x"y', "n": []}, "c": {}},
        [{"k": i, "v": "é" * (i % 7)} for i in range(50)],
        {"x": [(), (1, "two")], "y": ["tuples are lists"]},
        "plain",
        None,
    ],
)
def test_the_head_of_a_value_is_the_start_of_its_compact_form(value: Any) -> None:
    whole = _compact(value)
    for limit in (0, 3, 40, 400, 4000):
        head = views._compact_head(value, limit)
        assert whole.startswith(head)
        assert head == whole if len(whole) <= limit else len(head) > limit


def test_a_megabyte_output_is_cut_compact_and_a_small_one_indented() -> None:
    join = {"items": [{"index": i, "output": {"i": i, "ok": True}} for i in range(20_000)]}
    shown = views.pretty(join)
    assert shown.startswith(_compact(join)[: views.MAX_SHOWN_JSON])
    assert shown.endswith("\n… (cut here; `agentctl inspect` shows all of it)")
    assert len(shown) < views.MAX_SHOWN_JSON + 100
    assert views.pretty({"b": 1, "a": [1]}) == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
