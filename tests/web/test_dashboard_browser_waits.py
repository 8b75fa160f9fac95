"""Waits answered and forms that guide, in a real headless Chromium against ``agentctl ui``
as a real process: a pause resumed from the inbox, the timeline's bars, a refused reconcile
that keeps the form.

Set ``AGENTCTL_SCREENSHOTS=DIR`` to keep the screenshots (docs/dashboard.md uses them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.web.browser import browser_context, keep_screenshot, require_browser, signed_in
from tests.web.conftest import RETRIED, UNCERTAIN, Runs

# Seconds each (real agentctl processes, pages in the module's Chromium): started first by
# `make test` (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_chromium")]


def _shoot(page: Any, tmp_path: Path, name: str, **options: Any) -> None:
    shot = tmp_path / f"{name}.png"
    page.screenshot(path=str(shot), **options)
    keep_screenshot(shot)


def test_a_pause_is_resumed_from_the_inbox_and_each_attempt_is_a_bar(
    runs: Runs, ui_server: Any, tmp_path: Path
) -> None:
    require_browser()
    run_id = runs.roll(RETRIED, "retried")["runId"]
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
        page.goto(f"{base}/inbox")
        card = page.locator(f"article#pause-{run_id}-wait")
        assert "look at it" in card.inner_text()
        _shoot(page, tmp_path, "dashboard-inbox-pause", full_page=True)
        card.locator("input[name=reason]").fill("looked at it")
        card.locator("button", has_text="Resume").click()
        page.wait_for_url("**/inbox?notice=*")
        assert f"{run_id} resumed past wait" in page.locator(".notice").first.inner_text()

        page.goto(f"{base}/runs/{run_id}")
        page.locator("h1 .badge.s-succeeded").wait_for()
        gate = page.locator("#timeline .tl-row[data-task='gate']")
        # One bar per attempt: two failed, then the one that succeeded.
        assert gate.locator(".tl-bar.tl-attempt").count() == 3
        assert gate.locator(".tl-bar.tl-attempt.s-failed").count() == 2
        assert gate.locator(".tl-bar.tl-backoff").count() == 2
        assert page.locator("#timeline .tl-row[data-task='wait'] .tl-bar.tl-pause").count() == 1
        _shoot(page, tmp_path, "dashboard-timeline", full_page=True)
        page.set_viewport_size({"width": 420, "height": 900})
        _shoot(page, tmp_path, "dashboard-run-narrow", full_page=True)
    inspection = runs.inspect(run_id)
    assert inspection["run"]["state"] == "succeeded"
    gate_task = next(t for t in inspection["tasks"] if t["taskId"] == "gate")
    assert gate_task["attempt"] == 3


def test_a_refused_reconcile_keeps_the_form_and_the_example_fixes_it(
    runs: Runs, ui_server: Any, tmp_path: Path
) -> None:
    require_browser()
    data = runs.roll(UNCERTAIN, "slow")
    (effect,) = data["uncertainEffects"]
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
        page.goto(f"{base}/effects")
        form = page.locator(f"article[id='{effect['effectId']}'] form.reconcile")
        form.locator("select[name=status]").select_option("applied")
        form.locator("input[name=reason]").fill("the log shows it finished")
        form.locator("textarea[name=evidence]").fill("ci log line 42")
        # Checked in the page first: an applied conclusion without a result is not sent.
        form.locator("button", has_text="Reconcile").click()
        assert "needs the result" in form.locator(".problem").inner_text()
        assert page.url == f"{base}/effects"

        # A result the server refuses: the page comes back with everything typed.
        form.locator("textarea[name=result]").fill(json.dumps({"stdout": 1}))
        form.locator("button", has_text="Reconcile").click()
        page.locator("h1", has_text="Not reconciled yet").wait_for()
        refused = page.locator("form.reconcile")
        problems = refused.locator(".problems").inner_text()
        assert "does not match the shape builtin.shell.exec returns" in problems
        assert refused.locator("input[name=reason]").input_value() == "the log shows it finished"
        assert refused.locator("textarea[name=evidence]").input_value() == "ci log line 42"
        assert refused.locator("select[name=status]").input_value() == "applied"
        assert json.loads(refused.locator("textarea[name=result]").input_value()) == {"stdout": 1}
        _shoot(page, tmp_path, "dashboard-reconcile-refused", full_page=True)

        refused.locator("button", has_text="Use this example").click()
        refused.locator("button", has_text="Reconcile").click()
        page.wait_for_url("**/effects?notice=*")
        assert "reconciled as applied" in page.locator(".notice").first.inner_text()
    (conclusion,) = runs.inspect(data["runId"])["effects"][0]["reconciliations"]
    assert (conclusion["status"], conclusion["actor"]) == ("applied", "ui")
    assert conclusion["evidence"] == "ci log line 42"
