"""``runs analyze`` / ``runs upgrade`` on PostgreSQL: the conditional metadata updates
are the store's statements, run on the server's dialect (docs/durable-execution.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.pg.backends import execute, rows

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: generated}
spec:
  actions:
    set: {kind: builtin.assign}
  tasks:
    - {id: first, uses: "action:set", with: {value: 1}}
    - {id: second, uses: "action:set", needs: [first], with: {value: 2}}
"""


def test_an_older_fingerprint_is_upgraded_on_postgresql(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    wf = tmp_path / "wf.yaml"
    wf.write_text(WORKFLOW)
    rolled = cli("--output", "json", "roll", wf, "--db", postgres_url)
    assert rolled.exit_code == 0, rolled.stdout + rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    select = "SELECT definition_fingerprint FROM tasks WHERE run_id = ? AND task_id = ?"
    (current,) = rows(postgres_url, select, (run_id, "first"))[0]
    execute(
        postgres_url,
        "UPDATE tasks SET definition_fingerprint = ?, input_digest = NULL WHERE run_id = ? "
        "AND task_id = ?",
        ("sha256:older", run_id, "first"),
    )
    analysis = cli("--output", "json", "runs", "analyze", run_id, "--db", postgres_url)
    assert analysis.exit_code == 0, analysis.stdout + analysis.stderr
    assert analysis.json()["data"]["upgradeableTasks"] == ["first"]
    upgraded = cli("--output", "json", "runs", "upgrade", run_id, "--db", postgres_url)
    assert upgraded.exit_code == 0, upgraded.stdout + upgraded.stderr
    assert upgraded.json()["data"]["analysisAfter"]["alreadyCurrent"] is True
    assert rows(postgres_url, select, (run_id, "first")) == [(current,)]
    again = cli("--output", "json", "runs", "upgrade", run_id, "--db", postgres_url)
    assert again.json()["data"]["upgradedTasks"] == []
