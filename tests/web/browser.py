"""Shared by the browser tests: Debian's Chromium driven by Playwright for Python (never
its own browser downloads). Locally a test skips when the browser is missing; under CI
(``CI=true``, where ``.ci/run`` installs it) a missing browser is a failure.

Set ``AGENTCTL_SCREENSHOTS=DIR`` to keep the screenshots (docs/dashboard.md uses them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "browser_context",
    "keep_screenshot",
    "live_page",
    "require_browser",
    "signed_in",
]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require_browser() -> Any:
    """Playwright's ``sync_playwright``, or a skip (a failure under CI) naming what is missing."""
    problem = None
    if not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "the playwright package is missing (pip install -e '.[dev]')"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser test cannot run under CI: {problem}")
        pytest.skip(problem)
    return sync_playwright


def keep_screenshot(shot: Path) -> None:
    target = os.environ.get("AGENTCTL_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


@contextmanager
def browser_context() -> Iterator[Any]:
    """A fresh headless Chromium's context (1280x900 pages that wait up to 60 s for what
    they look for); the browser is closed afterwards, whatever the test did."""
    sync_playwright = require_browser()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(60_000)
            yield context
        finally:
            browser.close()


def live_page(context: Any, url: str, ready: str) -> Any:
    """A new tab on ``url``, once ``ready`` (a selector) shows and the live feed is on; the
    tab marks its document so a test can tell it later that it was never reloaded
    (``window.__sameDocument``)."""
    page = context.new_page()
    page.goto(url)
    page.locator(ready).wait_for()
    page.locator("#live.on").wait_for()
    page.evaluate("window.__sameDocument = true")
    return page


def signed_in(context: Any, url: str) -> tuple[Any, str]:
    """A tab opened on the address ``agentctl ui`` printed (its token becomes the session's
    cookie), and the dashboard's base address for the pages a test visits next."""
    page = context.new_page()
    page.goto(url)
    return page, url.split("?")[0].rstrip("/")
