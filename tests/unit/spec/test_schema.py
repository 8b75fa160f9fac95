"""The generated JSON Schema accepts every valid fixture and rejects unknown fields."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agentctl.spec import load_workflow, workflow_json_schema
from agentctl.spec.schema import SCHEMA_ID

ROOT = Path(__file__).parents[3]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "reference").glob("*.yaml")) + [
    ROOT / "workflows" / "python" / "review_pipeline.yaml"
]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = workflow_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def raw(path: Path) -> dict[str, Any]:
    result = load_workflow(path)
    assert result.ok and result.raw is not None
    return result.raw


def test_schema_identity() -> None:
    schema = workflow_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_ID == "https://agentctl.dev/schemas/workflow-v1.json"
    assert schema["title"] == "agentctl workflow (agentctl.dev/v1)"
    assert schema["required"] == ["apiVersion", "kind", "metadata", "spec"]
    task = schema["$defs"]["Task"]
    assert task["additionalProperties"] is False
    assert "with" in task["properties"] and "with_" not in task["properties"]
    assert task["properties"]["id"]["pattern"] == "^[A-Za-z][A-Za-z0-9_-]*$"
    loop = schema["$defs"]["Loop"]["properties"]["maxIterations"]
    assert (loop["minimum"], loop["maximum"]) == (1, 64)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_schema_accepts_valid_fixtures(
    validator: jsonschema.Draft202012Validator, path: Path
) -> None:
    assert list(validator.iter_errors(raw(path))) == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["spec"]["tasks"][0].__setitem__("bogus", 1),
        lambda d: d["spec"].__setitem__("bogus", 1),
        lambda d: d["metadata"].__setitem__("bogus", 1),
        lambda d: d["spec"].setdefault("policy", {}).__setitem__("bogus", 1),
    ],
)
def test_schema_rejects_unknown_fields(
    validator: jsonschema.Draft202012Validator, mutate: Any
) -> None:
    document = copy.deepcopy(raw(FIXTURES[0]))
    mutate(document)
    errors = list(validator.iter_errors(document))
    assert len(errors) == 1
    assert "'bogus' was unexpected" in errors[0].message


def test_schema_rejects_out_of_range_and_bad_ids(
    validator: jsonschema.Draft202012Validator,
) -> None:
    document = copy.deepcopy(raw(FIXTURES[2]))
    document["spec"]["tasks"][4]["loop"]["maxIterations"] = 65
    document["spec"]["tasks"][0]["id"] = "9x"
    errors = list(validator.iter_errors(document))
    messages = sorted(e.message for error in errors for e in [error, *error.context])
    assert "'9x' does not match '^[A-Za-z][A-Za-z0-9_-]*$'" in messages
    assert "65 is greater than the maximum of 64" in messages
    assert len(errors) == 2
