"""End to end in a real headless Chromium: `agentctl ui` as a real process on 127.0.0.1.

Debian's ``chromium`` package is driven by Playwright for Python (never its own browser
downloads). Locally the test skips when the browser is missing; under CI (``CI=true``, where
``.ci/run`` installs it) a missing browser is a failure.

Set ``AGENTCTL_SCREENSHOTS=DIR`` to keep the screenshots (docs/dashboard.md uses them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentctl.store import dashboard_repo
from agentctl.store.engine import open_store
from tests.web.browser import (
    browser_context,
    keep_screenshot,
    live_page,
    require_browser,
    signed_in,
)
from tests.web.conftest import ASKING, Runs

# Seconds each (real agentctl processes, pages in the module's Chromium): started first by
# `make test` (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_chromium")]


def _wait_until(page: Any, expression: str, seconds: float = 30.0) -> None:
    """Poll ``expression`` from outside the page: Playwright's ``wait_for_function`` builds
    its predicate with ``eval``, which the dashboard's Content-Security-Policy forbids."""
    import time

    deadline = time.monotonic() + seconds
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"never true: {expression}"
        page.wait_for_timeout(20)


def test_approve_and_answer_from_the_browser(runs: Runs, ui_server: Any, tmp_path: Path) -> None:
    require_browser()
    parked, approval, asked, question = runs.park_release_and_question()
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
        # The token left the address bar; the cookie carries it from here on.
        assert "token=" not in page.url
        assert page.locator(f"a[href='/runs/{parked['runId']}']").count() == 1
        # A second tab watches the parked run; it must follow it live, never reloading.
        watcher = live_page(context, f"{base}/runs/{parked['runId']}", "h1 .badge.s-paused")

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
    parked, approval, asked, question = runs.park_release_and_question()
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
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
        other = runs.park_in_a_process(ASKING, "asking-later")
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


def test_a_refresh_put_off_while_typing_happens_once_the_person_leaves_the_field(
    runs: Runs, ui_server: Any
) -> None:
    """While someone types, the page does not redraw under them; the change it put off is
    drawn as soon as they leave the field, with what they typed kept. Before, that change
    was dropped, and the page stayed stale until the store changed again (regression)."""
    require_browser()
    _, approval, _, _ = runs.park_release_and_question()
    url = ui_server()
    with browser_context() as context:
        page, base = signed_in(context, url)
        inbox = live_page(context, f"{base}/inbox", f"article#{approval}")
        reason = inbox.locator(f"article#{approval} input[name=reason]")
        reason.fill("checked the notes")  # the cursor stays in the field

        other = runs.park_in_a_process(ASKING, "asking-later")
        inbox.locator("body[data-pending='1']").wait_for(state="attached")
        assert inbox.locator(f"article#{other}").count() == 0
        assert reason.input_value() == "checked the notes"

        inbox.locator("h1").click()
        inbox.locator(f"article#{other}").wait_for()
        assert inbox.locator("body[data-pending]").count() == 0
        assert reason.input_value() == "checked the notes"
        assert inbox.evaluate("window.__sameDocument") is True


# Installed before the page's own script: every live-update message the page receives is kept
# in ``window.__markers``, and once ``window.__holdNext`` is set the next fetch the page makes
# gets its answer from the server at once but is handed to the page only on
# ``window.__release()`` (``window.__held`` tells that it is waiting).
_HOLD_ONE_FETCH = """
(() => {
  const Source = window.EventSource;
  window.__markers = [];
  window.EventSource = function (url, options) {
    const source = new Source(url, options);
    source.addEventListener("message", (event) => window.__markers.push(event.data));
    return source;
  };
  const fetchNow = window.fetch.bind(window);
  window.fetch = function (...args) {
    if (!window.__holdNext) { return fetchNow(...args); }
    window.__holdNext = false;
    return fetchNow(...args).then((response) => response.text().then((text) =>
      new Promise((resolve) => {
        window.__release = () => resolve(new Response(text, { status: response.status,
          headers: { "Content-Type": "text/html" } }));
        window.__held = true;
      })));
  };
})();
"""


def test_a_change_that_arrives_during_a_refresh_is_drawn_after_it(
    runs: Runs, ui_server: Any
) -> None:
    """The store changes again while the page is still fetching the previous change: when
    that fetch ends the page fetches once more, so it shows the later change too. Without
    it, the page kept the older content until the store happened to change again."""
    require_browser()
    _, approval, _, _ = runs.park_release_and_question()
    url = ui_server()
    with browser_context() as context:
        context.add_init_script(_HOLD_ONE_FETCH)
        _, base = signed_in(context, url)
        inbox = live_page(context, f"{base}/inbox", f"article#{approval}")
        inbox.evaluate("window.__holdNext = true")

        first = runs.park_in_a_process(ASKING, "asking-first")
        _wait_until(inbox, "window.__held === true")  # its refresh is in flight
        second = runs.park_in_a_process(ASKING, "asking-second")
        with open_store(str(runs.db), create=False) as store, store.read() as conn:
            marker = dashboard_repo.change_marker(conn)
        # The page heard of the second change while its fetch of the first was in flight.
        sent = json.dumps(json.dumps(marker))  # each message's data is the marker as JSON
        _wait_until(inbox, f"window.__markers.includes({sent})")
        assert inbox.locator("body[data-pending='1']").count() == 1
        assert inbox.locator(f"article#{second}").count() == 0

        inbox.evaluate("window.__release()")
        inbox.locator(f"article#{second}").wait_for()
        assert inbox.locator(f"article#{first}").count() == 1
        assert inbox.locator("body[data-pending]").count() == 0
        assert inbox.evaluate("window.__sameDocument") is True
