"""A workflow or command that needs an optional extra which is not installed is refused
with the extra's name and the pip command (exit 2), before a run exists.

The development environment has every extra, so each test runs the real ``agentctl`` in a
subprocess whose ``sitecustomize`` hides the extra's packages (``sys.modules[name] =
None``: ``find_spec`` answers "not installed" and ``import`` fails, as on a machine
without them). tests/packaging/test_wheel_extras.py checks the same on a real install of
the wheel without extras.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentctl.compiler import compile_workflow
from agentctl.compiler.drafts import Reporter
from agentctl.compiler.extras import check_extras, extras_needed
from agentctl.spec import load_workflow

MEMORY_WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: remember}
spec:
  policy: {approval: never}
  memory:
    longTerm: {namespace: notes}
  actions:
    store: {kind: builtin.long_term_memory.write}
    set: {kind: builtin.assign}
  tasks:
    - id: first
      uses: action:set
      with: {a: 1}
    - id: save
      uses: action:store
      needs: [first]
      with: {key: disk, content: {type: text, text: "db-2 ran out of disk space"}}
"""

MCP_WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: calls-mcp}
spec:
  policy: {approval: never}
  mcpServers:
    calc: {url: "http://127.0.0.1:9/mcp"}
  actions:
    call: {kind: mcp.call}
  tasks:
    - id: sum
      uses: action:call
      with: {server: calc, tool: add, arguments: {a: 1, b: 2}}
"""

HELLO = Path(__file__).resolve().parents[2] / "workflows" / "hello.yaml"


def _agentctl(
    tmp_path: Path, hidden: list[str], *args: str | Path
) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in hidden)
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "agentctl", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_check_and_roll_refuse_a_memory_workflow_without_the_vector_extra(
    tmp_path: Path,
) -> None:
    workflow = _write(tmp_path, "remember.yaml", MEMORY_WORKFLOW)
    checked = _agentctl(tmp_path, ["numpy"], "--output", "json", "check", workflow)
    assert checked.returncode == 2, checked.stderr
    (diagnostic,) = json.loads(checked.stderr)["diagnostics"]
    assert diagnostic["code"] == "missing_extra"
    assert "task `save` uses long-term memory" in diagnostic["message"]
    assert "optional extra `vector` (numpy)" in diagnostic["message"]
    assert "pip install 'agentctl[vector]'" in diagnostic["help"]
    assert diagnostic["path"] == "spec.tasks[1]" and diagnostic["line"] == 15

    db = tmp_path / "runs.db"
    rolled = _agentctl(tmp_path, ["numpy"], "roll", workflow, "--db", db)
    assert rolled.returncode == 2
    assert "pip install 'agentctl[vector]'" in rolled.stderr
    assert not db.exists(), "a refused workflow must not leave a database behind"


def test_the_memory_commands_name_the_vector_extra(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    found = _agentctl(
        tmp_path, ["numpy"], "--output", "json", "memory", "get", "notes", "k", "--db", db
    )
    assert found.returncode == 2, found.stderr
    error = json.loads(found.stderr)["error"]
    assert error["code"] == "extra.missing"
    assert "long-term memory needs the optional extra `vector` (numpy)" in error["message"]
    assert "pip install 'agentctl[vector]'" in error["hint"]


def test_check_refuses_an_mcp_workflow_without_the_mcp_extra(tmp_path: Path) -> None:
    workflow = _write(tmp_path, "mcp.yaml", MCP_WORKFLOW)
    checked = _agentctl(tmp_path, ["mcp"], "--output", "json", "check", workflow)
    assert checked.returncode == 2, checked.stderr
    (diagnostic,) = json.loads(checked.stderr)["diagnostics"]
    assert diagnostic["code"] == "missing_extra"
    assert "task `sum` uses MCP servers" in diagnostic["message"]
    assert "pip install 'agentctl[mcp]'" in diagnostic["help"]


def test_a_workflow_without_extras_checks_with_every_extra_hidden(tmp_path: Path) -> None:
    checked = _agentctl(tmp_path, ["numpy", "mcp"], "check", HELLO)
    assert checked.returncode == 0, checked.stderr


def test_with_the_extras_installed_nothing_is_reported(tmp_path: Path) -> None:
    for text in (MEMORY_WORKFLOW, MCP_WORKFLOW):
        loaded = load_workflow(str(_write(tmp_path, "w.yaml", text)))
        assert loaded.document is not None
        compiled = compile_workflow(loaded.document, source=loaded.source)
        assert compiled.ok, compiled.diagnostics


@pytest.mark.parametrize(
    ("text", "expected"),
    [(MEMORY_WORKFLOW, {"vector": "save"}), (MCP_WORKFLOW, {"mcp": "sum"})],
)
def test_the_plan_names_the_extras_it_needs(
    tmp_path: Path, text: str, expected: dict[str, str]
) -> None:
    loaded = load_workflow(str(_write(tmp_path, "w.yaml", text)))
    assert loaded.document is not None
    plan = compile_workflow(loaded.document, source=loaded.source).plan
    assert plan is not None
    assert extras_needed(plan) == expected
    reporter = Reporter(None)
    check_extras(plan, {}, reporter, is_installed=lambda name: name not in expected)
    assert [d.code for d in reporter.diagnostics] == ["missing_extra"]


def test_an_mcp_connection_without_the_sdk_fails_its_task_with_the_named_code(
    tmp_path: Path,
) -> None:
    # A path the compiler did not see (a resume on a host without the SDK) still names it.
    script = _write(
        tmp_path,
        "connect.py",
        "from agentctl.signals import TaskFailure\n"
        "from agentctl.tools.mcp_transport import open_client\n"
        "try:\n"
        "    open_client({'url': 'http://127.0.0.1:9/mcp'}, environ={}, timeout_seconds=1,"
        " process_allowlist=None)\n"
        "except TaskFailure as failure:\n"
        "    print(failure.code, failure.message, failure.details)\n",
    )
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['mcp'] = None\n")
    ran = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("extra.missing MCP server")
    assert "optional extra `mcp` (the MCP SDK)" in ran.stdout
    assert "pip install 'agentctl[mcp]'" in ran.stdout
