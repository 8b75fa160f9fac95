"""agentctl.json_schemas: the one home of compiling schemas (docs/json-schemas.md).

The rule, stated once and generated: a reference that does not start with ``#`` is refused
wherever it sits in a schema, located at its keyword, and nothing is read or fetched; an
in-document reference to something that exists compiles and validates.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.errors import UsageError
from agentctl.json_schemas import compile_schema, first_error, schema_problem

_HITS: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
        _HITS.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


names = st.text(st.characters(codec="utf-8", categories=("L", "N")), min_size=1, max_size=6)
# Where a sub-schema may sit: (keyword path from its parent, builder of the parent).
_PLACES = st.sampled_from(
    [
        ("properties", "name"),
        ("items",),
        ("allOf", 0),
        ("anyOf", 0),
        ("not",),
        ("additionalProperties",),
        ("$defs", "name"),
        ("if",),
        ("prefixItems", 0),
    ]
)


@st.composite
def nested(draw: st.DrawFn, leaf: dict[str, Any]) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """A schema holding ``leaf`` a few levels down, and the segments that reach it."""
    schema: dict[str, Any] = leaf
    segments: tuple[Any, ...] = ()
    for _ in range(draw(st.integers(0, 4))):
        place = draw(_PLACES)
        name = draw(names)
        keys = tuple(name if p == "name" else p for p in place)
        if keys[0] in ("allOf", "anyOf", "prefixItems"):
            parent: dict[str, Any] = {keys[0]: [schema]}
        elif len(keys) == 2:
            parent = {keys[0]: {keys[1]: schema}}
        else:
            parent = {keys[0]: schema}
        if draw(st.booleans()):
            parent["type"] = draw(st.sampled_from(["object", "array", "string"]))
        schema, segments = parent, keys + segments
    return schema, segments


outside = st.one_of(
    st.builds(lambda p: f"file:///etc/{p}.json#/x", names),
    st.builds(lambda p: f"HOST/{p}.json", names),
    st.builds(lambda p: f"{p}.json#/x", names),
    st.builds(lambda p: f"//evil.example/{p}", names),
    st.text(max_size=20).filter(lambda t: not t.startswith("#")),
)


@given(data=st.data(), ref=outside, keyword=st.sampled_from(["$ref", "$dynamicRef"]))
def test_a_reference_outside_the_schema_is_refused_where_it_is(
    host: str, data: st.DataObject, ref: str, keyword: str
) -> None:
    ref = ref.replace("HOST", host)
    schema, segments = data.draw(nested({keyword: ref}))
    problem = schema_problem(schema)
    assert problem is not None
    assert problem.segments == (*segments, keyword)
    with pytest.raises(UsageError) as raised:
        compile_schema(schema, "the test schema")
    assert raised.value.code == "schema.invalid"
    assert raised.value.exit_code == 2
    assert "the test schema" in raised.value.message
    assert _HITS == []


@given(data=st.data(), name=names, value=st.one_of(st.integers(), st.text(max_size=5)))
def test_an_in_document_reference_compiles_and_validates(
    data: st.DataObject, name: str, value: Any
) -> None:
    schema, _ = data.draw(nested({"$ref": f"#/$defs/{name}"}))
    schema.setdefault("$defs", {})[name] = {"type": "string"}
    assert schema_problem(schema) is None
    validator = compile_schema({"$ref": f"#/$defs/{name}", "$defs": {name: {"type": "string"}}})
    assert (first_error(validator, value) is None) == isinstance(value, str)


@given(data=st.data(), target=st.sampled_from(["#/$defs/missing", "#/nowhere/0", "#nothing"]))
def test_an_in_document_reference_to_nothing_is_refused(data: st.DataObject, target: str) -> None:
    schema, segments = data.draw(nested({"$ref": target}))
    problem = schema_problem(schema)
    assert problem is not None and problem.segments == (*segments, "$ref")
    assert "does not resolve" in problem.message


def test_a_file_reference_never_shows_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "config.json"
    secret.write_text(json.dumps({"token": "TOPSECRET-1"}))
    schema = {"properties": {"a": {"$ref": f"file://{secret}#/missing"}}}
    with pytest.raises(UsageError) as raised:
        compile_schema(schema)
    assert "TOPSECRET" not in raised.value.message + str(raised.value.hint)


def test_a_pointer_into_data_is_unresolvable_while_validating_and_fetches_nothing(
    host: str,
) -> None:
    schema = {"const": {"$ref": f"{host}/x.json"}, "properties": {"a": {"$ref": "#/const"}}}
    validator = compile_schema(schema, "the contract")
    with pytest.raises(UsageError) as raised:
        first_error(validator, {"a": 1}, "the contract")
    assert raised.value.code == "schema.invalid"
    assert _HITS == []


def test_properties_named_like_keywords_are_names() -> None:
    schema = {"properties": {"$ref": {"type": "string"}, "enum": {"$ref": "#/$defs/a"}}}
    problem = schema_problem({**schema, "$defs": {"a": {"type": "integer"}}})
    assert problem is None
    problem = schema_problem(schema)
    assert problem is not None and problem.segments == ("properties", "enum", "$ref")


def test_an_unknown_dialect_is_refused_not_guessed() -> None:
    problem = schema_problem({"$schema": "https://example.com/my-dialect"})
    assert problem is not None and problem.segments == ("$schema",)
