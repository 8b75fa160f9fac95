"""The run page's task graph in a real headless Chromium (dagre lays it out in the page).

Set ``AGENTCTL_SCREENSHOTS=DIR`` to keep the screenshots (docs/dashboard.md uses them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.web.browser import browser_context, keep_screenshot, require_browser, signed_in
from tests.web.conftest import RELEASE, Runs

# Seconds each (real agentctl processes, pages in the module's Chromium): started first by
# `make test` (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_chromium")]

DRAWN_EDGES = "els => els.map(e => e.dataset.from + ' -> ' + e.dataset.to).sort()"


def test_the_graph_draws_the_plans_edges_and_names_foreach_children_by_item(
    runs: Runs, ui_server: Any, tmp_path: Path
) -> None:
    require_browser()
    run_id = runs.roll(RELEASE, "release")["runId"]
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
        page.goto(f"{base}/runs/{run_id}")
        page.locator("#graph svg g.gnode").first.wait_for()
        served = context.request.get(f"{base}/runs/{run_id}/graph.json").json()
        plan_edges = sorted(f"{e['from']} -> {e['to']}" for e in served["edges"])
        # Every edge of the plan is drawn, and nothing else (the group is small: open).
        assert page.eval_on_selector_all("#graph path.gedge", DRAWN_EDGES) == plan_edges
        assert len(plan_edges) == 8
        drawn = page.eval_on_selector_all("#graph g.gnode", "els => els.map(e => e.dataset.id)")
        assert sorted(drawn) == sorted(n["id"] for n in served["nodes"])
        # A foreach child is labelled by its item, not by its generated id.
        lint = page.locator("#graph g.gnode[data-label='lint']")
        assert lint.locator("text.glabel").text_content() == "lint"
        assert (lint.get_attribute("data-id") or "").startswith("check--0000-")
        assert page.locator("#graph g.gnode[data-id='publish']").get_attribute("class") == (
            "gnode s-waiting_for_approval"
        )
        shot = tmp_path / "dashboard-graph.png"
        page.locator("#graph").screenshot(path=str(shot))
        keep_screenshot(shot)

        # Collapsed, the children fold into their aggregate and their edges follow it.
        page.locator("#graph .gcluster[data-group='check'] .gtoggle").click()
        assert page.eval_on_selector_all("#graph path.gedge", DRAWN_EDGES) == [
            "check -> publish",
            "prepare -> check",
            "prepare -> publish",
        ]
        assert "3 succeeded" in (
            page.locator("#graph g.gnode[data-id='check'] text.gstate").text_content() or ""
        )
        page.locator("#graph g.gnode[data-id='check'] .gexpand").click()
        assert page.locator("#graph g.gnode[data-label='unit']").count() == 1

        # Clicking a task opens it in the task list.
        page.locator("#graph g.gnode[data-id='publish']").click()
        assert page.locator("#task-publish").get_attribute("open") is not None
        assert page.url.endswith("#task-publish")
