"""The audit chain through its repository: appends, reads back and verifies, and the
digest format is pinned so chains written by earlier versions keep verifying."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentctl.digest import canonical_json, digest_json
from agentctl.observability.audit import append_event, count_events, list_events, verify_chain
from agentctl.store.engine import Store, StoreSettings, open_store

AT = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "a.db"), settings=StoreSettings(synchronous="OFF")) as opened:
        with opened.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json, "
                "status, created_at, updated_at) VALUES ('run-1', 'wf', 'a', 'b', '{}', "
                "'running', '2026-01-01 00:00:00.000000', '2026-01-01 00:00:00.000000')"
            )
        yield opened


def test_digest_format_is_stable(store: Store) -> None:
    with store.write() as conn:
        first = append_event(conn, "run-1", "run.created", {"b": 1, "a": [2]}, now=AT)
        second = append_event(
            conn, "run-1", "task.succeeded", {}, now=AT.replace(microsecond=250), task_id="t"
        )
    expected_first = digest_json(
        {
            "runId": "run-1",
            "seq": 1,
            "kind": "run.created",
            "taskId": None,
            "effectId": None,
            "payload": canonical_json({"a": [2], "b": 1}),
            "prevDigest": None,
            "createdAt": "2026-01-02T12:00:00",
            "formatVersion": 1,
        }
    )
    assert first.digest == expected_first
    assert second.prev_digest == expected_first
    with store.read() as conn:
        events = list_events(conn, "run-1")
        report = verify_chain(conn, "run-1")
        assert count_events(conn, "run-1") == 2
    assert report.ok and report.events == 2
    assert [e.digest for e in events] == [first.digest, second.digest]
    assert [e.to_json()["createdAt"] for e in events] == [
        "2026-01-02T12:00:00",
        "2026-01-02T12:00:00.000250",
    ]
    assert events[1].created_at == AT.replace(microsecond=250)


def test_a_rewritten_time_breaks_the_chain(store: Store) -> None:
    with store.write() as conn:
        append_event(conn, "run-1", "run.created", {}, now=AT)
        append_event(conn, "run-1", "run.succeeded", {}, now=AT)
        conn.exec_driver_sql(
            "UPDATE audit_events SET created_at = '2026-01-02 12:00:01.000000' WHERE seq = 2"
        )
    with store.read() as conn:
        report = verify_chain(conn, "run-1")
    assert (report.ok, report.broken_at) == (False, 2)
