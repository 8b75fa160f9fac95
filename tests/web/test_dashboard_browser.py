"""End to end in a real headless Chromium: `agentctl ui` as a real process on 127.0.0.1.

Debian's ``chromium`` package is driven by Playwright for Python (never its own browser
downloads). Locally the test skips when the browser is missing; under CI (``CI=true``, where
``.ci/run`` installs it) a missing browser is a failure.

Set ``AGENTCTL_SCREENSHOTS=DIR`` to keep the screenshots (docs/dashboard.md uses them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, keep_screenshot, require_browser
from tests.web.conftest import ASKING, RELEASE, Runs


def test_approve_and_answer_from_the_browser(runs: Runs, ui_server: Any, tmp_path: Path) -> None:
    sync_playwright = require_browser()
    parked = runs.roll(RELEASE, "release")
    (approval,) = parked["pendingApprovals"]
    asked = runs.roll(ASKING, "asking")
    (question,) = asked["pendingApprovals"]
    url = ui_server()
    base = url.split("?")[0].rstrip("/")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.goto(url)
            # The token left the address bar; the cookie carries it from here on.
            assert "token=" not in page.url
            assert page.locator(f"a[href='/runs/{parked['runId']}']").count() == 1
            # A second tab watches the parked run; it must follow it live, never reloading.
            watcher = context.new_page()
            watcher.set_default_timeout(60_000)
            watcher.goto(f"{base}/runs/{parked['runId']}")
            watcher.locator("h1 .badge.s-paused").wait_for()
            watcher.locator("#live.on").wait_for()
            watcher.evaluate("window.__sameDocument = true")

            page.click("nav >> text=Inbox")
            card = page.locator(f"article#{approval}")
            card.wait_for()
            assert "write 14 bytes to out/release.txt" in card.inner_text()
            page.locator(f"article#{question}").wait_for()
            inbox_shot = tmp_path / "dashboard-inbox.png"
            page.screenshot(path=str(inbox_shot), full_page=True)
            keep_screenshot(inbox_shot)

            card.locator("input[name=reason]").fill("release notes checked")
            card.locator("button", has_text="Approve").click()
            page.wait_for_url("**/inbox?notice=*")
            assert f"{approval} approved" in page.locator(".notice").first.inner_text()

            watcher.locator("h1 .badge.s-succeeded").wait_for()
            assert watcher.evaluate("window.__sameDocument") is True
            assert watcher.locator("#audit-verdict").inner_text() == "verified"
            watcher.locator("#task-publish summary").click()
            run_shot = tmp_path / "dashboard-run.png"
            watcher.screenshot(path=str(run_shot), full_page=True)
            keep_screenshot(run_shot)

            answer = page.locator(f"article#{question}")
            answer.locator("select[name=value]").select_option(label="production")
            answer.locator("button", has_text="Answer").click()
            page.wait_for_url("**/inbox?notice=*")
            page.goto(f"{base}/runs/{asked['runId']}")
            page.locator("h1 .badge.s-succeeded").wait_for()
        finally:
            browser.close()
    released = runs.inspect(parked["runId"])
    assert released["run"]["state"] == "succeeded"
    (decided,) = released["approvals"]
    assert (decided["status"], decided["resolver"]) == ("approved", "ui")
    assert (runs.workspace / "out" / "release.txt").read_text() == "released 1.2.3"
    answered = runs.inspect(asked["runId"])
    assert answered["approvals"][0]["answer"] == "production"
    assert answered["run"]["state"] == "succeeded"
    assert answered["run"]["output"]["use"]["output"] == {"target": "production"}
