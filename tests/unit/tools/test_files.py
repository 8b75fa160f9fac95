"""File primitives on real files: capped UTF-8 reads, atomic writes, the naive diff."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentctl.errors import TaskError
from agentctl.tools.files import (
    NEW_FILE_MODE,
    naive_diff,
    read_existing_for_write,
    read_text,
    write_atomic,
)


@pytest.fixture
def area(tmp_path: Path) -> Path:
    """An empty directory of our own (tmp_path also holds the autouse home and work dirs)."""
    directory = tmp_path / "area"
    directory.mkdir()
    return directory


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_read_text_returns_exact_text(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_bytes("line\r\nzwei é\n".encode())
    assert read_text(target) == "line\r\nzwei é\n"


def test_read_text_cap_is_inclusive(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_bytes(b"x" * 10)
    assert read_text(target, limit=10) == "x" * 10
    with pytest.raises(TaskError) as caught:
        read_text(target, limit=9)
    assert caught.value.code == "file.too_large"
    assert caught.value.message == f"file `{target}` is larger than 9 bytes and cannot be read"


def test_read_text_default_cap_is_one_mebibyte(tmp_path: Path) -> None:
    target = tmp_path / "big.txt"
    target.write_bytes(b"x" * (1 << 20))
    assert len(read_text(target)) == 1 << 20
    target.write_bytes(b"x" * ((1 << 20) + 1))
    with pytest.raises(TaskError) as caught:
        read_text(target)
    assert caught.value.code == "file.too_large"


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        ("missing", "file.not_found"),
        ("directory", "file.is_directory"),
        ("latin1", "file.not_utf8"),
    ],
)
def test_read_text_failures(tmp_path: Path, setup: str, code: str) -> None:
    target = tmp_path / "t"
    if setup == "directory":
        target.mkdir()
    elif setup == "latin1":
        target.write_bytes("café".encode("latin-1"))
    with pytest.raises(TaskError) as caught:
        read_text(target)
    assert caught.value.code == code


def test_read_existing_for_write(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    assert read_existing_for_write(target) is None
    target.write_text("old")
    assert read_existing_for_write(target) == "old"
    target.write_bytes(b"x" * 11)
    with pytest.raises(TaskError) as caught:
        read_existing_for_write(target, limit=10)
    assert caught.value.code == "file.too_large"
    assert caught.value.message.endswith("cannot be overwritten")


def test_write_atomic_creates_parents_with_default_mode(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "new.txt"
    old_umask = os.umask(0o077)
    try:
        write_atomic(target, "hé\nllo")
    finally:
        os.umask(old_umask)
    assert target.read_bytes() == "hé\nllo".encode()
    assert _mode(target) == NEW_FILE_MODE == 0o644
    assert sorted(os.listdir(target.parent)) == ["new.txt"]


def test_write_atomic_keeps_the_existing_mode(tmp_path: Path) -> None:
    target = tmp_path / "script.sh"
    target.write_text("old")
    target.chmod(0o750)
    write_atomic(target, "new")
    assert target.read_text() == "new"
    assert _mode(target) == 0o750


def test_write_atomic_replaces_the_inode(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    target.write_text("old")
    before = target.stat().st_ino
    held = open(target)  # a reader holding the old file keeps seeing the old content
    try:
        write_atomic(target, "new")
        assert held.read() == "old"
    finally:
        held.close()
    assert target.stat().st_ino != before


def test_write_atomic_failure_leaves_no_temp_file(area: Path) -> None:
    target = area / "dir-target"
    target.mkdir()
    (target / "keep").write_text("x")
    with pytest.raises(TaskError) as caught:
        write_atomic(target, "content")
    assert caught.value.code == "file.is_directory"
    assert sorted(os.listdir(area)) == ["dir-target"]
    assert sorted(os.listdir(target)) == ["keep"]


def test_write_atomic_under_a_file_parent_fails_cleanly(area: Path) -> None:
    (area / "file").write_text("x")
    with pytest.raises(TaskError) as caught:
        write_atomic(area / "file" / "child.txt", "content")
    assert caught.value.code == "file.write_failed"
    assert sorted(os.listdir(area)) == ["file"]


def test_write_atomic_rejects_unencodable_text(area: Path) -> None:
    with pytest.raises(TaskError) as caught:
        write_atomic(area / "t.txt", "lone \ud800 surrogate")
    assert caught.value.code == "input.invalid"
    assert os.listdir(area) == []


def test_naive_diff_unchanged_is_empty() -> None:
    assert naive_diff("same\n", "same\n") == ""
    assert naive_diff("", "") == ""


def test_naive_diff_byte_for_byte() -> None:
    assert naive_diff("a\nb", "a\nc\n") == "--- before\n+++ after\n-a\n-b\n+a\n+c\n+"
    assert naive_diff("old", "new") == "--- before\n+++ after\n-old\n+new"
    assert naive_diff("x\n", "") == "--- before\n+++ after\n-x\n-\n+"


def test_naive_diff_of_a_missing_file_uses_empty_old_text() -> None:
    assert naive_diff(None, "new\n") == "--- before\n+++ after\n-\n+new\n+"
    assert naive_diff(None, "") == "--- before\n+++ after\n-\n+"
