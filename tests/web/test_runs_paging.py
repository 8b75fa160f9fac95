"""The runs page pages through runs with a cursor (keyset paging), newest first."""

from __future__ import annotations

import re
from typing import Any

from tests.web.conftest import ASKING, RELEASE, Runs


def _shown(page: str) -> list[str]:
    return re.findall(
        r'<tr class="run row-[a-z_]+">\s*<td>.*?</td>\s*<td><a href="/runs/([^"]+)"', page
    )


def _link(page: str, name: str) -> str | None:
    found = re.search(rf'id="{name}" href="([^"]+)"', page)
    return None if found is None else found.group(1).replace("&amp;", "&")


def test_older_runs_follow_page_by_page_without_gaps_or_repeats(runs: Runs, dashboard: Any) -> None:
    rolled = [runs.roll(ASKING, "asking")["runId"] for _ in range(5)]
    client = dashboard()
    newest_first = list(reversed(rolled))
    first = client.get("/?limit=2").text
    assert _shown(first) == newest_first[:2]
    assert _link(first, "newest") is None
    second_url = _link(first, "older")
    assert second_url is not None and "limit=2" in second_url and "before=" in second_url
    second = client.get(second_url).text
    assert _shown(second) == newest_first[2:4]
    assert _link(second, "newest") == "/?state=&workflow=&q=&limit=2"
    third_url = _link(second, "older")
    assert third_url is not None
    third = client.get(third_url).text
    assert _shown(third) == newest_first[4:]
    assert _link(third, "older") is None  # the oldest run is on this page
    # Filters carry over to the next page.
    filtered = client.get("/?limit=2&workflow=asking&state=paused").text
    older = _link(filtered, "older")
    assert older is not None and "workflow=asking" in older and "state=paused" in older
    # A full last page has no "older" link when nothing older exists.
    assert _link(client.get("/?limit=5").text, "older") is None


def test_a_broken_cursor_is_a_clear_400(runs: Runs, dashboard: Any) -> None:
    runs.roll(ASKING, "asking")
    response = dashboard().get("/?before=yesterday")
    assert response.status_code == 400
    assert "is not a page cursor" in response.text and "older runs" in response.text


def test_the_workflow_filter_lists_each_name_once_sorted(runs: Runs, dashboard: Any) -> None:
    for text, name in ((RELEASE, "release"), (ASKING, "asking"), (RELEASE, "release")):
        runs.roll(text, name)
    page = dashboard().get("/").text
    options = re.findall(r'<option value="([a-z]+)" >\1</option>', page)
    assert [o for o in options if o in ("asking", "release")] == ["asking", "release"]
