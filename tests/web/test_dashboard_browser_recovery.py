"""In a real headless Chromium against a real ``agentctl ui`` process: retry and fork a
finished run from its page, and reconcile an effect a killed ``agentctl roll`` left in doubt.

Screenshots are test outputs (``AGENTCTL_SCREENSHOTS=DIR`` keeps them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.web.browser import (
    browser_context,
    keep_screenshot,
    live_page,
    require_browser,
    signed_in,
)
from tests.web.conftest import LEDGER, SHELL_RESULT, Runs
from tests.web.test_dashboard_recovery import FLAKY

# Seconds each (real agentctl processes, pages in the module's Chromium): started first by
# `make test` (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_chromium")]


def _failed_run(runs: Runs) -> str:
    path = runs.workspace / "flaky.yaml"
    path.write_text(FLAKY)
    result = runs.cli("--output", "json", "roll", path, "--db", runs.db)
    assert result.exit_code == 4, result.stderr
    run_id: str = result.error_json()["error"]["runId"]
    return run_id


def test_retry_then_fork_from_the_run_page(runs: Runs, ui_server: Any, tmp_path: Path) -> None:
    require_browser()
    failed = _failed_run(runs)
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
        page.goto(f"{base}/runs/{failed}")
        page.locator("h1 .badge.s-failed").wait_for()
        (runs.workspace / "ready").write_text("")
        retry = page.locator("#retry-form")
        retry.locator("select[name=scope]").select_option(value="failed")
        retry.locator("input[name=reason]").fill("the file is there now")
        retry.locator("button", has_text="Retry").click()
        page.wait_for_url(re.compile(r".*/runs/retry-[^?]+\?notice=.*"))
        retried = page.url.split("/runs/")[1].split("?")[0]
        assert "the dashboard executes it" in page.locator(".notice").first.inner_text()
        # The child `agentctl resume` executes it; the page follows without a reload.
        page.locator("h1 .badge.s-succeeded").wait_for()
        shot = tmp_path / "dashboard-retry.png"
        page.screenshot(path=str(shot), full_page=True)
        keep_screenshot(shot)

        page.locator("#fork-form input[name=reason]").fill("once more, on purpose")
        page.locator("#fork-form button", has_text="Fork").click()
        page.wait_for_url(re.compile(r".*/runs/fork-[^?]+\?notice=.*"))
        forked = page.url.split("/runs/")[1].split("?")[0]
        page.locator("h1 .badge.s-succeeded").wait_for()
    retried_run = runs.inspect(retried)["run"]
    assert (retried_run["mode"], retried_run["sourceRunId"]) == ("retry", failed)
    forked_run = runs.inspect(forked)["run"]
    assert (forked_run["mode"], forked_run["sourceRunId"], forked_run["state"]) == (
        "fork",
        retried,
        "succeeded",
    )
    # The source's `first` ran once, the retry reused it, the fork ran it again.
    assert (runs.workspace / "runs.txt").read_text() == "x\nx\n"


def test_reconcile_what_a_killed_roll_left_then_the_run_finishes(
    runs: Runs, ui_server: Any, tmp_path: Path
) -> None:
    require_browser()
    # A real `agentctl roll`, SIGKILLed after `one`'s command ran, before its outcome
    # was recorded: the effect is left started, unconfirmed, under a dead owner.
    run_id = runs.roll_killed(LEDGER, "ledger", "effect.dispatched")
    (effect,) = runs.inspect(run_id)["effects"]
    assert effect["status"] == "started"
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
        # A second tab follows the run; it must see it finish without a reload.
        watcher = live_page(context, f"{base}/runs/{run_id}", "h1 .badge.s-running")

        page.click("nav >> text=Effects")
        card = page.locator(f"article[id='{effect['effectId']}']")
        card.wait_for()
        assert "builtin.shell.exec" in card.inner_text()
        effects_shot = tmp_path / "dashboard-effects.png"
        page.screenshot(path=str(effects_shot), full_page=True)
        keep_screenshot(effects_shot)

        # The operator checked the outside world: the ledger has the line.
        assert (runs.workspace / "ledger.txt").read_text() == "a\n"
        card.locator("select[name=status]").select_option(value="applied")
        card.locator("input[name=reason]").fill("ledger.txt has the line")
        card.locator("textarea[name=evidence]").fill("cat ledger.txt -> a")
        card.locator("textarea[name=result]").fill(json.dumps(SHELL_RESULT))
        card.locator("button", has_text="Reconcile").click()
        page.wait_for_url("**/effects?notice=*")
        notice = page.locator(".notice").first.inner_text()
        assert "reconciled as applied" in notice and f"resumed run {run_id}" in notice
        page.locator("text=No effect is in doubt.").wait_for()

        watcher.locator("h1 .badge.s-succeeded").wait_for()
        assert watcher.evaluate("window.__sameDocument") is True
        run_shot = tmp_path / "dashboard-reconciled-run.png"
        watcher.screenshot(path=str(run_shot), full_page=True)
        keep_screenshot(run_shot)
    inspection = runs.inspect(run_id)
    assert inspection["run"]["state"] == "succeeded"
    (conclusion,) = inspection["effects"][0]["reconciliations"]
    assert (conclusion["status"], conclusion["actor"]) == ("applied", "ui")
    assert conclusion["evidence"] == "cat ledger.txt -> a"
    # Reused, not redone: the command ran once; the run went on to `two`.
    assert (runs.workspace / "ledger.txt").read_text() == "a\n"
    assert (runs.workspace / "out" / "two.txt").read_text() == "after a"
    assert inspection["audit"]["verified"] is True
