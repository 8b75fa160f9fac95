"""The runs page's reads on both backends: keyset paging and the workflow names."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: {name}}}
spec:
  actions:
    set: {{kind: builtin.assign}}
  tasks:
    - {{id: a, uses: "action:set", with: {{n: 1}}}}
"""


def test_run_pages_and_workflow_names(cli: Any, database: str, tmp_path: Path) -> None:
    from agentctl.store import dashboard_repo
    from agentctl.store.engine import open_store

    rolled = []
    for name in ("beta", "alpha", "beta", "gamma"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(textwrap.dedent(WORKFLOW.format(name=name)))
        result = cli("--output", "json", "roll", path, "--db", database)
        assert result.exit_code == 0, result.stderr
        rolled.append(result.json()["data"]["runId"])
    with open_store(database, create=False) as store, store.read() as conn:
        assert dashboard_repo.workflow_names(conn) == ["alpha", "beta", "gamma"]
        seen: list[str] = []
        before = None
        while True:
            page = dashboard_repo.run_summaries(conn, limit=3, before=before)
            seen += [row.id for row in page]
            if len(page) < 3:
                break
            before = (page[-1].created_at, page[-1].id)
        assert seen == list(reversed(rolled))
        assert all((row.tasks_done, row.tasks_total) == (1, 1) for row in page)
        betas = dashboard_repo.run_summaries(conn, workflow="beta", limit=1)
        (older,) = dashboard_repo.run_summaries(
            conn, workflow="beta", limit=5, before=(betas[0].created_at, betas[0].id)
        )
        assert (betas[0].id, older.id) == (rolled[2], rolled[0])


def test_change_marker_search_and_progress(cli: Any, database: str, tmp_path: Path) -> None:
    """The change marker moves with every transition, and the run search takes LIKE's
    wildcards literally, on both backends (the marker read SQLite's rowid on PostgreSQL)."""
    from agentctl.store import dashboard_repo
    from agentctl.store.engine import open_store

    def marker() -> str:
        with open_store(database, create=False) as store, store.read() as conn:
            return dashboard_repo.change_marker(conn)

    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent(WORKFLOW.format(name="alpha")))
    markers = []
    for _ in range(2):
        result = cli("--output", "json", "roll", path, "--db", database)
        assert result.exit_code == 0, result.stderr
        markers.append(marker())
    assert markers[0] != markers[1]
    run_id = result.json()["data"]["runId"]
    with open_store(database, create=False) as store, store.read() as conn:
        assert [r.id for r in dashboard_repo.run_summaries(conn, search=run_id[-12:])] == [run_id]
        for wildcard in ("%", "_", "!", "\\"):
            assert dashboard_repo.run_summaries(conn, search=wildcard) == []
        assert dashboard_repo.run_header(conn, run_id) == ("alpha", None)
        assert [row[:3] for row in dashboard_repo.task_progress(conn, run_id)] == [
            ("a", "succeeded", 1)
        ]
        assert dashboard_repo.paused_tasks(conn, run_id) == []
