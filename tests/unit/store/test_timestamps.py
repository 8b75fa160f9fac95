"""The one timestamp codec: stored text, read-back datetimes and the JSON face agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import insert, select

from agentctl.store.artifact_tables import artifact_blobs
from agentctl.store.engine import open_store
from agentctl.store.timestamps import from_db, to_db, to_iso, utc

NOON = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def test_stored_text_is_utc_wall_time_with_six_fraction_digits() -> None:
    assert to_db(NOON) == "2026-01-02 12:00:00.000000"
    assert to_db(NOON.replace(microsecond=7)) == "2026-01-02 12:00:00.000007"
    plus_two = NOON.astimezone(timezone(timedelta(hours=2)))
    assert to_db(plus_two) == "2026-01-02 12:00:00.000000"  # the instant, not the wall
    assert to_db(NOON.replace(tzinfo=None)) == "2026-01-02 12:00:00.000000"  # naive is UTC
    assert to_db(None) is None


def test_read_back_is_the_same_aware_instant() -> None:
    for value in (NOON, NOON.replace(microsecond=123456), NOON + timedelta(days=400)):
        back = from_db(to_db(value))
        assert back == value and back.tzinfo is UTC
    assert from_db(datetime(2026, 1, 2, 12, 0)) == NOON  # a driver's naive datetime
    assert from_db(None) is None


def test_text_order_is_time_order() -> None:
    instants = [NOON + timedelta(microseconds=n * 999_983) for n in range(-50, 50)]
    assert sorted(instants, key=to_db) == sorted(instants)


def test_json_face_is_iso_8601_utc_with_z() -> None:
    assert to_iso(NOON) == "2026-01-02T12:00:00Z"
    assert to_iso(NOON.astimezone(timezone(timedelta(hours=-5)))) == "2026-01-02T12:00:00Z"
    assert to_iso(datetime(2026, 1, 2, 12, 0, 0, 500)) == "2026-01-02T12:00:00.000500Z"
    assert to_iso(None) is None
    assert utc(datetime(2026, 1, 2, 12, 0)).tzinfo is UTC


def test_sqlalchemy_datetime_columns_store_and_read_the_same_text(tmp_path: Path) -> None:
    """Rows written through SQLAlchemy Core and through the driver with the codec are
    indistinguishable, so both access styles can share a table during the move."""
    stamp = NOON.replace(microsecond=42)
    with open_store(str(tmp_path / "t.db")) as store:
        with store.write() as conn:
            conn.execute(
                insert(artifact_blobs).values(digest="core", size_bytes=1, created_at=stamp)
            )
            conn.exec_driver_sql(
                "INSERT INTO artifact_blobs (digest, size_bytes, created_at) VALUES (?, 1, ?)",
                ("driver", to_db(stamp)),
            )
        with store.read() as conn:
            raw = dict(conn.exec_driver_sql("SELECT digest, created_at FROM artifact_blobs").all())
            typed = dict(
                conn.execute(select(artifact_blobs.c.digest, artifact_blobs.c.created_at)).all()
            )
    assert raw == {"core": to_db(stamp), "driver": to_db(stamp)}
    assert {from_db(value) for value in typed.values()} == {stamp}


@given(
    st.datetimes(
        min_value=datetime(1000, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.one_of(st.none(), st.just(UTC), st.timezones()),
    )
)
def test_the_fast_format_is_the_stored_format(value: datetime) -> None:
    """to_db's isoformat shortcut writes exactly what strftime(_DB_FORMAT) of the UTC
    instant writes: stored times feed audit digests, so one character more or less would
    break every chain written before."""
    instant = value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
    assert to_db(value) == instant.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert to_db(value) == to_db(value)  # the cached answer is the same text
