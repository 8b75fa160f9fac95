"""An audit event's digest is ``digest_json`` of its nine fields as one object.

The chain writes that object's canonical text out by hand (for every event appended and
every event verified); it must equal what ``digest_json`` gives for any field values, or
chains written before would no longer verify.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.digest import canonical_json, digest_json
from agentctl.observability.audit import _stamp, event_digest
from agentctl.store.timestamps import to_db

AT = datetime(2026, 11, 30, 21, 0, 0, 123456, tzinfo=UTC)
EAST = AT.astimezone(timezone(timedelta(hours=5)))
CASES = [
    ("run-1", 1, "run.created", None, None, "{}", None, AT, 1),
    ("run-1", 7, "task.succeeded", "s4", None, canonical_json({"a": 1}), "sha256:ab", AT, 1),
    ("run-é", 12, "effect.confirmed", "t/ü", "eff-1", '{"q":"\\"x\\""}', "p", AT, 2),
    ("r\\n", 3, "k\n\t\x01", "\u2028", "", canonical_json({"u": "\u00e9\u4e2d"}), "", AT, 1),
    ("run-2", 2, "run.resumed", None, None, "{}", "d", EAST, 1),
    ("run-3", 4, "run.resumed", None, None, "{}", "d", AT.replace(tzinfo=None), 1),
]


@pytest.mark.parametrize("fields", CASES)
def test_written_out_event_digest_matches_digest_json(fields: tuple[object, ...]) -> None:
    run_id, seq, kind, task_id, effect_id, payload, prev, created, version = fields
    assert isinstance(created, datetime)
    stamp = created.astimezone(UTC) if created.tzinfo else created.replace(tzinfo=UTC)
    expected = digest_json(
        {
            "runId": run_id,
            "seq": seq,
            "kind": kind,
            "taskId": task_id,
            "effectId": effect_id,
            "payload": payload,
            "prevDigest": prev,
            "createdAt": stamp.replace(tzinfo=None).isoformat(),
            "formatVersion": version,
        }
    )
    assert event_digest(*fields) == expected  # type: ignore[arg-type]


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.none() | st.just(UTC) | st.timezones(),
    )
    | st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(
        lambda moment: moment.replace(microsecond=0)
    )
)
def test_the_event_time_digested_is_the_old_definition(moment: datetime) -> None:
    # _stamp is written from the stored text (one formatting per event); it must stay
    # the UTC wall time's isoformat, or chains written before would no longer verify.
    expected = (
        (moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC))
        .replace(tzinfo=None)
        .isoformat()
    )
    assert _stamp(moment) == expected
    assert _stamp(moment) == expected  # and again, from the stored text's cache
    assert to_db(moment) == expected.replace("T", " ") + ("" if moment.microsecond else ".000000")
