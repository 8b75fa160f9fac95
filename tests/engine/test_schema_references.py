"""A schema never reaches outside itself (docs/json-schemas.md; issue 38, items 1 and 2).

Every `$ref` that is not in-document is refused before anything is read or fetched: a
real HTTP server on 127.0.0.1 counts the requests a schema could cause (always none), and a
secret file named by a `file://` reference never shows up in any output.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SECRET = "TOPSECRET-7f3a"


class _Counting(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
        self.hits.append(self.path)
        body = json.dumps({"type": "string"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_host() -> Iterator[tuple[str, list[str]]]:
    """A real server a reference could fetch from, and the paths it was asked for."""
    hits: list[str] = []
    handler = type("Handler", (_Counting,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"auths": {"token": SECRET}}))
    return path


WRITE = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: refs}}
spec:
  policy: {{approval: never, writableRoots: ["."]}}
  actions:
    write: {{kind: builtin.write}}
  tasks:
    - id: a
      uses: action:write
      with: {{path: out.txt, content: hi}}
      outputSchema:
        type: object
{schema}
"""


@pytest.mark.parametrize("kind", ["file", "http", "relative"])
def test_check_refuses_a_reference_outside_the_schema_at_its_line(
    cli: Any,
    write_workflow: Any,
    tmp_path: Path,
    schema_host: tuple[str, list[str]],
    secret_file: Path,
    kind: str,
) -> None:
    base, hits = schema_host
    ref = {
        "file": f"file://{secret_file}#/missing",
        "http": f"{base}/schema.json",
        "relative": "other.json#/x",
    }[kind]
    path = write_workflow(
        WRITE.format(schema=f"        properties:\n          path: {{$ref: {json.dumps(ref)}}}")
    )
    checked = cli("--output", "json", "check", path)
    assert checked.exit_code == 2, checked.stdout + checked.stderr
    (diagnostic,) = checked.error_json()["diagnostics"]
    assert diagnostic["code"] == "schema_violation"
    assert diagnostic["path"] == 'spec.tasks[0].outputSchema.properties.path["$ref"]'
    assert diagnostic["line"] == 15
    assert "points outside the schema" in diagnostic["message"]
    rolled = cli("roll", path, "--db", tmp_path / "r.db")
    assert rolled.exit_code == 2, rolled.stderr
    assert not (path.parent / "out.txt").exists()  # refused before any effect
    assert hits == []
    assert SECRET not in checked.stdout + checked.stderr + rolled.stdout + rolled.stderr


def test_a_reference_into_data_fails_the_task_after_its_effect_cleanly(
    cli: Any, write_workflow: Any, tmp_path: Path, schema_host: tuple[str, list[str]]
) -> None:
    """`check` does not walk data (`const`), so a pointer into it passes; applying the
    schema then meets the outside reference, which the empty registry cannot resolve: the
    task fails (exit 4) with the run concluded, and nothing is fetched."""
    base, hits = schema_host
    schema = (
        f"        const: {{$ref: {json.dumps(base + '/x.json')}}}\n"
        "        properties:\n"
        '          path: {$ref: "#/const"}'
    )
    path = write_workflow(WRITE.format(schema=schema))
    assert cli("check", path).exit_code == 0
    db = tmp_path / "r.db"
    rolled = cli("--output", "json", "roll", path, "--db", db)
    assert rolled.exit_code == 4, rolled.stderr
    (run,) = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"]
    assert run["state"] == "failed"  # concluded, not left `running`
    run_id = run["runId"]
    shown = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    (task,) = shown["tasks"]
    assert task["error"]["code"] == "schema.invalid"
    assert [e["status"] for e in shown["effects"]] == ["succeeded"]
    assert (path.parent / "out.txt").read_text() == "hi"
    resumed = cli("resume", run_id, "--db", db)
    assert resumed.exit_code != 1, resumed.stderr
    assert hits == []


SLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: slow}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "sleep 20"]
      timeoutSeconds: 1
  tasks:
    - id: step
      uses: action:work
"""


def test_an_operator_result_schema_refers_only_inside_itself(
    cli: Any,
    write_workflow: Any,
    tmp_path: Path,
    schema_host: tuple[str, list[str]],
    secret_file: Path,
) -> None:
    base, hits = schema_host
    db = tmp_path / "r.db"
    data = cli("--output", "json", "roll", write_workflow(SLOW), "--db", db).json()["data"]
    (effect,) = data["uncertainEffects"]
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"exitCode": 0}))
    refs = [f"{base}/result.json", f"file://{secret_file}#/missing", "#/$defs/missing"]
    for ref in refs:
        schema = tmp_path / "schema.json"
        schema.write_text(json.dumps({"properties": {"exitCode": {"$ref": ref}}}))
        refused = cli(
            "--output",
            "json",
            "reconcile",
            effect["effectId"],
            "--status",
            "applied",
            "--reason",
            "checked by hand",
            "--result-file",
            result,
            "--result-schema-file",
            schema,
            "--db",
            db,
        )
        assert refused.exit_code == 2, refused.stderr
        error = refused.error_json()["error"]
        assert error["code"] == "schema.invalid"
        assert "/properties/exitCode/$ref" in error["message"]
        assert SECRET not in refused.stderr
    assert hits == []
    listed = cli("--output", "json", "reconcile", "--list", "--db", db).json()["data"]
    assert [e["effectId"] for e in listed["effects"]] == [effect["effectId"]]  # nothing recorded
