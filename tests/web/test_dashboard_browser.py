"""End to end in a real headless Chromium: `agentctl ui` as a real process on 127.0.0.1.

Debian's ``chromium`` package is driven by Playwright for Python (never its own browser
downloads). Locally the test skips when the browser is missing; under CI (``CI=true``, where
``.ci/run`` installs it) a missing browser is a failure.

Set ``AGENTCTL_SCREENSHOTS=DIR`` to keep the screenshots (docs/dashboard.md uses them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.web.browser import browser_context, keep_screenshot, require_browser
from tests.web.conftest import ASKING, RELEASE, Runs


def test_approve_and_answer_from_the_browser(runs: Runs, ui_server: Any, tmp_path: Path) -> None:
    require_browser()
    parked = runs.roll(RELEASE, "release")
    (approval,) = parked["pendingApprovals"]
    asked = runs.roll(ASKING, "asking")
    (question,) = asked["pendingApprovals"]
    url = ui_server()
    base = url.split("?")[0].rstrip("/")
    with browser_context() as context:
        page = context.new_page()
        page.goto(url)
        # The token left the address bar; the cookie carries it from here on.
        assert "token=" not in page.url
        assert page.locator(f"a[href='/runs/{parked['runId']}']").count() == 1
        # A second tab watches the parked run; it must follow it live, never reloading.
        watcher = context.new_page()
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
    released = runs.inspect(parked["runId"])
    assert released["run"]["state"] == "succeeded"
    (decided,) = released["approvals"]
    assert (decided["status"], decided["resolver"]) == ("approved", "ui")
    assert (runs.workspace / "out" / "release.txt").read_text() == "released 1.2.3"
    answered = runs.inspect(asked["runId"])
    assert answered["approvals"][0]["answer"] == "production"
    assert answered["run"]["state"] == "succeeded"
    assert answered["run"]["output"]["use"]["output"] == {"target": "production"}


def test_a_live_refresh_keeps_what_a_person_entered_and_has_not_sent(
    runs: Runs, ui_server: Any
) -> None:
    """A chosen answer and a typed reason survive the page swapping its content when the
    store changes; before, the refresh put the form back as the server drew it, and the
    answer sent was the first choice instead of the one picked (regression)."""
    require_browser()
    parked = runs.roll(RELEASE, "release")
    (approval,) = parked["pendingApprovals"]
    asked = runs.roll(ASKING, "asking")
    (question,) = asked["pendingApprovals"]
    url = ui_server()
    base = url.split("?")[0].rstrip("/")
    with browser_context() as context:
        page = context.new_page()
        page.goto(url)
        page.goto(f"{base}/inbox")
        page.locator("#live.on").wait_for()
        card = page.locator(f"article#{approval}")
        card.locator("input[name=reason]").fill("release notes checked")
        answer = page.locator(f"article#{question}")
        answer.locator("select[name=value]").select_option(label="production")
        # The person looks elsewhere: no field of theirs has the focus any more.
        page.locator("h1").click()
        refreshed = page.evaluate("document.body.dataset.refreshed || '0'")

        # Meanwhile another run parks on a question: the inbox redraws itself live.
        # (A real process: Playwright's own event loop runs in this thread.)
        (runs.workspace / "later.yaml").write_text(textwrap.dedent(ASKING))
        later = subprocess.run(
            [sys.executable, "-m", "agentctl", "--output", "json", "roll", "later.yaml"]
            + ["--db", str(runs.db)],
            cwd=runs.workspace,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert later.returncode == 3, later.stderr
        (other,) = json.loads(later.stdout)["data"]["pendingApprovals"]
        page.locator(f"article#{other}").wait_for()
        assert page.evaluate("document.body.dataset.refreshed") != refreshed

        assert card.locator("input[name=reason]").input_value() == "release notes checked"
        assert answer.locator("select[name=value]").input_value() == '"production"'
        # A card the person did not touch is drawn as the server sends it.
        untouched = page.locator(f"article#{other} select[name=value]")
        assert untouched.input_value() == '"staging"'

        answer.locator("button", has_text="Answer").click()
        page.wait_for_url("**/inbox?notice=*")
        card = page.locator(f"article#{approval}")
        assert card.locator("input[name=reason]").input_value() == ""
        card.locator("input[name=reason]").fill("release notes checked")
        card.locator("button", has_text="Approve").click()
        page.wait_for_url("**/inbox?notice=*")
    answered = runs.inspect(asked["runId"])
    assert answered["approvals"][0]["answer"] == "production"
    (decided,) = runs.inspect(parked["runId"])["approvals"]
    assert decided["status"] == "approved"
    assert "release notes checked" in str(decided)
