"""An owner id names this process (``host:pid:start:nonce``); its start time is read from
``/proc`` once per process, not for every id (a worker makes one per run it claims)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from agentctl.store import ownership


def test_the_start_time_is_read_once_per_process_and_again_in_a_forked_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[int] = []
    original = ownership._read_stat

    def counted(pid: int) -> Any:
        read.append(pid)
        return original(pid)

    me = os.getpid()
    monkeypatch.setattr(ownership, "_started", None)
    monkeypatch.setattr(ownership, "_read_stat", counted)
    ids = [ownership.new_owner_id() for _ in range(5)]
    assert read == [me]
    assert len(set(ids)) == 5  # a nonce each
    _, pid, start, _ = ids[0].split(":")
    assert (int(pid), start) == (me, original(me)[1])  # type: ignore[index]
    assert ownership.owner_alive(ids[0])  # which reads /proc, as it must
    read.clear()
    # Another pid (a forked child): its own start time.
    monkeypatch.setattr(ownership.os, "getpid", lambda: 1)
    child = ownership.new_owner_id()
    assert read == [1]
    assert child.split(":")[1:3] == ["1", original(1)[1]]  # type: ignore[index]


def test_an_unreadable_start_time_is_read_again_next_time(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[int] = []

    def unreadable(pid: int) -> None:
        read.append(pid)

    monkeypatch.setattr(ownership, "_started", None)
    monkeypatch.setattr(ownership, "_read_stat", unreadable)
    assert ownership.new_owner_id().split(":")[2] == "0"
    assert ownership.new_owner_id().split(":")[2] == "0"
    assert len(read) == 2
