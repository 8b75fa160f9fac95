"""A process that runs workflows keeps the garbage collector off its start-up objects.

The first run of a process moves everything alive into the collector's permanent
generation (agentctl/engine/run/collector.py), once: a second run freezes nothing more.
A fan-out's structural contracts are met without loading the JSON Schema validator.
(What this saves is measured by bench/engine_bench.py, not asserted here.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FAN_OUT = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fan-out}
spec:
  policy: {approval: never}
  actions:
    step: {kind: builtin.assign}
  tasks:
    - id: unit
      uses: action:step
      foreach: {items: [1, 2, 3]}
      with: {i: "${{ vars.item }}", ok: true}
    - id: join
      uses: action:step
      needs: [unit]
      with: {items: "${{ tasks.unit.output.items }}"}
"""

PROBE = """
import contextlib, gc, io, json, sys
from agentctl.cli.main import main

before = gc.get_freeze_count()
counts = []
for db in ("first.db", "second.db"):
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["--output", "json", "roll", "fan-out.yaml", "--db", db])
    counts.append([code, gc.get_freeze_count()])
print(json.dumps({"before": before, "runs": counts, "jsonschema": "jsonschema" in sys.modules}))
"""


def _probe(tmp_path: Path) -> dict[str, object]:
    (tmp_path / "fan-out.yaml").write_text(FAN_OUT)
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, object] = json.loads(result.stdout)
    return found


def test_the_first_run_freezes_start_up_objects_once_and_loads_no_validator(
    tmp_path: Path,
) -> None:
    found = _probe(tmp_path)
    assert found["before"] == 0
    (first_code, first), (second_code, second) = found["runs"]  # type: ignore[misc]
    assert first_code == second_code == 0
    assert first > 10_000  # the imported modules, classes and functions
    assert second <= first  # the second run froze nothing (frozen objects can still be freed)
    assert found["jsonschema"] is False
