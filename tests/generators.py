"""Equivalence transforms shared by the generated tests: the same workflow, written
differently. The identity property test (tests/unit/compiler/test_identity_rules.py) and the
model-based test (tests/model) both draw their documents through these, so every workflow
the model test runs has its keys in a seed-chosen order at every level and a seed-chosen
YAML style — what a first attempt sees, while a resumed one reads the stored, sorted copy.
"""

from __future__ import annotations

import random
from typing import Any

import yaml

__all__ = ["STYLES", "shuffled", "yaml_text"]

STYLES = ("block", "flow", "comments")


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with the keys of every object, at every depth, reordered."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


def yaml_text(data: Any, style: str) -> str:
    """``data`` as YAML in one of ``STYLES``, keeping its key order."""
    if style == "flow":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=True, width=10_000)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    if style == "comments":
        return "\n".join(
            f"{line}  # note" if line.rstrip().endswith(":") else line for line in text.splitlines()
        )
    return text
