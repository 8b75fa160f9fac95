"""In a real headless Chromium against a real ``agentctl ui`` process: retry and fork a
finished run from its page, and reconcile an effect a killed ``agentctl roll`` left in doubt.

Screenshots are test outputs (``AGENTCTL_SCREENSHOTS=DIR`` keeps them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, keep_screenshot, require_browser
from tests.web.conftest import Runs
from tests.web.test_dashboard_recovery import FLAKY


def _failed_run(runs: Runs) -> str:
    path = runs.workspace / "flaky.yaml"
    path.write_text(FLAKY)
    result = runs.cli("--output", "json", "roll", path, "--db", runs.db)
    assert result.exit_code == 4, result.stderr
    run_id: str = result.error_json()["error"]["runId"]
    return run_id


def test_retry_then_fork_from_the_run_page(runs: Runs, ui_server: Any, tmp_path: Path) -> None:
    sync_playwright = require_browser()
    failed = _failed_run(runs)
    url = ui_server()
    base = url.split("?")[0].rstrip("/")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(60_000)
            page.goto(url)
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
        finally:
            browser.close()
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
