"""The payload codec (store/sealing.py): what it refuses, and that it refuses it clearly."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from agentctl.errors import PersistenceError, UsageError
from agentctl.store import encryption_repo
from agentctl.store.engine import open_store
from agentctl.store.sealing import Sealer, open_blob, seal, seal_blob, unseal


def _sealer(key_id: str = "k1") -> Sealer:
    return Sealer(active=key_id, given={key_id: os.urandom(32)})


class _Conn:
    def __init__(self, sealer: Sealer) -> None:
        self.sealer = sealer


def test_a_value_opens_only_in_its_own_record_and_column() -> None:
    conn = _Conn(_sealer())
    stored = seal(conn, "tasks", "output_json", ("run-1", "a"), '{"secret": 1}')
    assert stored is not None and stored.startswith("aes256gcm:k1:") and "secret" not in stored
    assert unseal(conn, "tasks", "output_json", ("run-1", "a"), stored) == '{"secret": 1}'
    for column, record in (("error_json", ("run-1", "a")), ("output_json", ("run-2", "a"))):
        with pytest.raises(PersistenceError) as moved:
            unseal(conn, "tasks", column, record, stored)
        assert moved.value.code == "encryption.key_mismatch"
    tampered = stored[:-4] + ("AAAA" if not stored.endswith("AAAA") else "BBBB")
    with pytest.raises(PersistenceError) as altered:
        unseal(conn, "tasks", "output_json", ("run-1", "a"), tampered)
    assert altered.value.code == "encryption.key_mismatch"
    # Clear values (written before enable) pass through; None stays None.
    assert unseal(conn, "tasks", "output_json", ("run-1", "a"), '{"y": 2}') == '{"y": 2}'
    assert seal(conn, "tasks", "output_json", ("run-1", "a"), None) is None


def test_a_value_under_a_key_not_offered_names_the_key_and_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stored = seal(_Conn(_sealer("old")), "runs", "inputs_json", ("run-1",), "{}")
    reader = _Conn(Sealer(active="new", variables={"old": "OLD_KEY"}, given={}))
    monkeypatch.delenv("OLD_KEY", raising=False)
    with pytest.raises(PersistenceError) as missing:
        unseal(reader, "runs", "inputs_json", ("run-1",), stored)
    assert missing.value.code == "encryption.key_missing"
    assert "'old'" in missing.value.message and "$OLD_KEY" in missing.value.message


def test_bad_keys_are_usage_errors_naming_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCTL_ENCRYPTION_KEYS", "k1=" + base64.b64encode(b"short").decode())
    with pytest.raises(UsageError) as short:
        Sealer().key("k1")
    assert short.value.code == "encryption.bad_key" and "AGENTCTL_ENCRYPTION_KEYS" in str(
        short.value.message
    )
    monkeypatch.setenv("AGENTCTL_ENCRYPTION_KEYS", "no-equals-sign")
    with pytest.raises(UsageError):
        Sealer().key("k1")


def test_a_sealed_blob_opens_only_under_its_name() -> None:
    sealer = _sealer()
    sealed = seal_blob(sealer, "ab" * 32, b"file bytes")
    assert b"file bytes" not in sealed
    assert open_blob(sealer, "ab" * 32, sealed) == b"file bytes"
    with pytest.raises(PersistenceError):
        open_blob(sealer, "cd" * 32, sealed)
    assert open_blob(sealer, "ab" * 32, b"clear bytes") == b"clear bytes"


def test_enable_refuses_a_missing_variable_and_a_second_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(str(tmp_path / "r.db"))
    try:
        monkeypatch.delenv("NOPE", raising=False)
        with pytest.raises(UsageError) as unset:
            encryption_repo.seal_under(store, "k1", "NOPE", rotating=False)
        assert unset.value.code == "encryption.bad_key" and "$NOPE" in unset.value.message
        monkeypatch.setenv("K1", base64.b64encode(os.urandom(32)).decode())
        monkeypatch.setenv("K2", base64.b64encode(os.urandom(32)).decode())
        with pytest.raises(UsageError) as not_enabled:
            encryption_repo.seal_under(store, "k1", "K1", rotating=True)
        assert not_enabled.value.code == "encryption.not_enabled"
        encryption_repo.seal_under(store, "k1", "K1", rotating=False)
        with pytest.raises(UsageError) as second:
            encryption_repo.seal_under(store, "k2", "K2", rotating=False)
        assert second.value.code == "encryption.already_enabled"
        # The same id with another key is a mismatch, found before anything is written.
        monkeypatch.setenv("K1", base64.b64encode(os.urandom(32)).decode())
        with pytest.raises(PersistenceError) as other:
            encryption_repo.seal_under(store, "k1", "K1", rotating=False)
        assert other.value.code == "encryption.key_mismatch"
    finally:
        store.close()


def test_memory_words_are_the_words_the_text_index_sees() -> None:
    """Sealed memory finds the words of a text itself (store/memory_sealing.py), with the
    text index's own tokenizer: the two must not drift apart."""
    import sqlite3

    from agentctl.store import memory_sealing
    from agentctl.store.migrate import migrations_dir

    migration = (migrations_dir() / "versions" / "0003_memory_search.py").read_text()
    assert f"tokenize='{memory_sealing.TOKENIZER}'" in migration
    texts = [
        "Ünïcode_Café-crème, ΣΊΣΥΦΟΣ ς İstanbul x\u0301y 中文 Ǆemal 42nd ßtraße",
        # ASCII takes a shorter path than the tokenizer; it must split the same way.
        "Foo_bar-BAZ, x.y@z.io 42nd\t(hi)! it's C++ v1.2 ~/a/b `q` \x7f\x01end",
    ]
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE f USING fts5(t, tokenize='{memory_sealing.TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    for text in texts:
        conn.execute("DELETE FROM f")
        conn.execute("INSERT INTO f (rowid, t) VALUES (1, ?)", (text,))
        indexed = [row[0] for row in conn.execute("SELECT term FROM v ORDER BY offset")]
        assert memory_sealing.index_words(text) == indexed, text
    conn.close()
    assert memory_sealing.words_of(["foo_bar", "", "Café"]) == [["foo", "bar"], [], ["cafe"]]
