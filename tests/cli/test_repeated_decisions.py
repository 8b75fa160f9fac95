"""A decision given twice is one decision (issue 38 item 11).

Approving an approved approval (or answering an answered question with the same answer)
is answered as a no-op: exit 0, `unchanged: true`, and no second resolution in the audit
chain, whose event would contradict the row that keeps the first. A different second
decision stays refused (exit 2, `approval.resolved`).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

PAUSING = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: gated}
spec:
  policy: {approval: mutations, nonInteractive: pause, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
    ask: {kind: builtin.ask}
  tasks:
    - id: where
      uses: action:ask
      with: {prompt: "Deploy where?", choices: [staging, production]}
    - id: publish
      uses: action:save
      with: {path: out/release.txt, content: "1.2.3"}
"""


def _events(db: Path, kind: str) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT payload_json FROM audit_events WHERE kind = ? ORDER BY seq", (kind,)
        ).fetchall()
    conn.close()
    return [json.loads(row[0]) for row in rows]


def _pending(cli: Any, db: Path) -> str:
    listed = cli("--output", "json", "approvals", "list", "--db", db).json()["data"]
    (pending,) = [a["approvalId"] for a in listed["approvals"] if a["status"] == "pending"]
    return str(pending)


def test_the_same_decision_twice_is_one_decision(cli: Any, tmp_path: Path) -> None:
    workflow = tmp_path / "gated.yaml"
    workflow.write_text(PAUSING)
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "roll", workflow, "--db", db)
    assert paused.exit_code == 3, paused.stderr
    run_id = paused.json()["data"]["runId"]
    question = _pending(cli, db)
    for _ in range(2):
        answered = cli("approvals", "answer", question, '"staging"', "--db", db)
        assert answered.exit_code == 0, answered.stderr
    assert "already answered; nothing changed" in answered.stdout
    assert len(_events(db, "question.answered")) == 1
    assert cli("approvals", "answer", question, '"production"', "--db", db).exit_code == 2
    assert cli("resume", run_id, "--db", db).exit_code == 3  # now the write waits
    approval = _pending(cli, db)
    for _ in range(2):
        done = cli("approvals", "approve", approval, "--reason", "ok", "--db", db)
        assert done.exit_code == 0, done.stderr
    assert "already approved; nothing changed" in done.stdout
    again = cli("--output", "json", "approvals", "approve", approval, "--reason", "x", "--db", db)
    assert again.json()["data"]["unchanged"] is True
    assert len(_events(db, "approval.resolved")) == 1
    refused = cli("--output", "json", "approvals", "reject", approval, "--reason", "no", "--db", db)
    assert refused.exit_code == 2
    assert refused.error_json()["error"]["code"] == "approval.resolved"
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
