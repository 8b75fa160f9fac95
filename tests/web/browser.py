"""Shared by the browser tests: Debian's Chromium driven by Playwright for Python (never
its own browser downloads). Locally a test skips when the browser is missing; under CI
(``CI=true``, where ``.ci/run`` installs it) a missing browser is a failure.

One Chromium per test module, started by its first browser test and closed after its last
(the module's ``shared_chromium`` fixture, tests/web/conftest.py; a module's tests then run
on one xdist worker); each test gets a fresh browser context of its own (its own cookies,
storage and cache, closed after the test), so tests share nothing a page could see.
Playwright runs with its async API on an event loop in a thread of its own, and the tests
drive it through synchronous stand-ins (:class:`Driven`): Playwright's sync API would mark
the test's own thread as running an event loop for as long as the browser lives, and an
in-process ``agentctl`` command (``asyncio.run``) in the same test would then fail.

Set ``AGENTCTL_SCREENSHOTS=DIR`` to keep the screenshots (docs/dashboard.md uses them).
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "browser_context",
    "close_chromium",
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


def require_browser() -> None:
    """Nothing when Chromium and Playwright are here; else a skip (a failure under CI)
    naming what is missing."""
    problem = None
    if not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        problem = "the playwright package is missing (pip install -e '.[dev]')"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser test cannot run under CI: {problem}")
        pytest.skip(problem)


def keep_screenshot(shot: Path) -> None:
    target = os.environ.get("AGENTCTL_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


class _Chromium:
    """Playwright (async API) and one headless Chromium, owned by an event loop that runs
    in a daemon thread; :meth:`run` executes a call there and waits for its result."""

    def __init__(self) -> None:
        from playwright.async_api import async_playwright

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="chromium", daemon=True)
        self.thread.start()
        self.playwright = self.run(lambda: async_playwright().start())
        self.browser = self.run(
            lambda: self.playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=60_000
            )
        )

    def run(self, call: Callable[[], Any]) -> Any:
        """``call()`` on the browser's loop (awaited when it returns an awaitable)."""

        async def step() -> Any:
            result = call()
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(step(), self.loop).result()

    def alive(self) -> bool:
        return bool(self.thread.is_alive() and self.run(self.browser.is_connected))

    def close(self) -> None:
        try:
            self.run(self.browser.close)
            self.run(self.playwright.stop)
            self.run(self.loop.shutdown_asyncgens)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)
            if not self.thread.is_alive():
                self.loop.close()


_chromium: _Chromium | None = None
_chromium_lock = threading.Lock()


def _shared_chromium() -> _Chromium:
    """The Chromium in use, started on first use (again if it has gone away)."""
    global _chromium
    with _chromium_lock:
        if _chromium is None or not _chromium.alive():
            _chromium = _Chromium()
            atexit.register(close_chromium)
        return _chromium


def close_chromium() -> None:
    """Close the shared Chromium and its thread, if one is running."""
    global _chromium
    with _chromium_lock:
        chromium, _chromium = _chromium, None
    if chromium is not None:
        chromium.close()


class Driven:
    """A Playwright object (page, context, locator...) used from the test's thread as the
    sync API would be: each attribute is read and each method called on the browser's loop,
    awaited there, and Playwright objects come back as ``Driven`` too."""

    def __init__(self, chromium: _Chromium, target: Any) -> None:
        self._chromium = chromium
        self._target = target

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._wrap(item) for item in value]
        if type(value).__module__.startswith("playwright."):
            return Driven(self._chromium, value)
        return value

    def __getattr__(self, name: str) -> Any:
        value = self._chromium.run(lambda: getattr(self._target, name))
        if not callable(value):
            return self._wrap(value)

        def method(*args: Any, **kwargs: Any) -> Any:
            args = tuple(a._target if isinstance(a, Driven) else a for a in args)
            return self._wrap(self._chromium.run(lambda: value(*args, **kwargs)))

        return method


@contextmanager
def browser_context() -> Iterator[Any]:
    """A fresh context (1280x900 pages that wait up to 60 s for what they look for) of this
    process's headless Chromium; the context is closed afterwards, whatever the test did."""
    require_browser()
    chromium = _shared_chromium()
    context = Driven(
        chromium,
        chromium.run(lambda: chromium.browser.new_context(viewport={"width": 1280, "height": 900})),
    )
    try:
        context.set_default_timeout(60_000)
        yield context
    finally:
        context.close()


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
