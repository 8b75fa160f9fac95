"""The payload codec (store/sealing.py, over store/keyring.py; blob files in
store/blob_sealing.py): what it refuses, and that it refuses it clearly."""

from __future__ import annotations

import base64
import itertools
import os
import warnings
from pathlib import Path

import pytest

from agentctl.errors import PersistenceError, UsageError
from agentctl.store import encryption_repo
from agentctl.store.blob_sealing import open_blob, seal_blob
from agentctl.store.engine import open_store
from agentctl.store.keyring import Sealer, next_nonce
from agentctl.store.sealing import is_sealed, key_id_of, reseal, seal, unseal, unseal_column


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


def test_a_column_read_from_many_rows_opens_each_sealed_value_in_its_own_record() -> None:
    conn = _Conn(_sealer())
    keys = [("run-1", "a"), ("run-1", "b"), ("run-1", "c")]
    clear = ['{"x":1}', '{"note":"aes256gcm:k1:not sealed"}', "[]"]
    # Nothing sealed: the list read is the list returned, no value opened one by one.
    assert unseal_column(conn, "tasks", "output_json", iter(keys), clear) is clear
    # A sealed value among clear ones, in either form (text on PostgreSQL, bytes on SQLite).
    text = seal(conn, "tasks", "output_json", keys[1], '{"secret":2}')
    assert isinstance(text, str)
    binary = Sealer(active="k1", given=conn.sealer.given, binary=True)
    raw = binary.seal_stored('{"secret":3}', b"tasks.output_json/run-1/c")
    assert isinstance(raw, bytes)
    for stored in ([clear[0], text, "[]"], [clear[0], clear[1], raw], [clear[0], text, raw]):
        opened = unseal_column(conn, "tasks", "output_json", iter(keys), list(stored))
        pairs = zip(keys, stored, strict=True)
        assert opened == [unseal(conn, "tasks", "output_json", k, v) for k, v in pairs]
    # Each value opens only under its own record's key.
    with pytest.raises(PersistenceError):
        moved = iter(keys[1:] + keys[:1])
        unseal_column(conn, "tasks", "output_json", moved, [clear[0], text, "[]"])


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


# Values the previous release sealed (text form) under this key: they must keep opening.
_RELEASE_KEY = bytes(range(32))
_RELEASE_VALUES = (
    (
        ("tasks", "output_json", ("run-1", "a")),
        "aes256gcm:release-0:T/Zg3GiZzsRSAfUSbd+tBPZCpSvSuC7XWqsbqVVDRpxlxdF1CIU63fo=",
        '{"secret": 1}',
    ),
    (
        ("checkpoints", "memory_delta_json", ("run-1", 3)),
        "aes256gcm:release-0:08YVST2Bm6NLB7PNP1PuWqLjGAoxe2SfWzhd1LdO",
        "{}",
    ),
)


def test_values_sealed_by_the_previous_release_open_with_either_form() -> None:
    for binary in (False, True):
        conn = _Conn(Sealer(active="new", given={"release-0": _RELEASE_KEY}, binary=binary))
        for (table, column, record), stored, plain in _RELEASE_VALUES:
            assert unseal(conn, table, column, record, stored) == plain
            # Re-sealed (enable/rotate) it takes the sealer's form and the active key.
            conn.sealer.given["new"] = os.urandom(32)
            again = reseal(conn.sealer, table, column, record, stored)
            assert isinstance(again, bytes) == binary and key_id_of(again) == "new"
            assert unseal(conn, table, column, record, again) == plain


def test_the_bytes_form_is_the_text_form_without_base64() -> None:
    conn = _Conn(Sealer(active="k1", given={"k1": os.urandom(32)}, binary=True))
    stored = seal(conn, "runs", "output_json", ("run-1",), '{"secret": 1}')
    assert isinstance(stored, bytes) and stored.startswith(b"aes256gcm:k1:")
    assert len(stored) == len(b"aes256gcm:k1:") + 12 + len('{"secret": 1}') + 16
    assert is_sealed(stored) and is_sealed(memoryview(stored)) and key_id_of(stored) == "k1"
    assert unseal(conn, "runs", "output_json", ("run-1",), memoryview(stored)) == '{"secret": 1}'
    as_text = "aes256gcm:k1:" + base64.b64encode(stored[len(b"aes256gcm:k1:") :]).decode()
    assert unseal(conn, "runs", "output_json", ("run-1",), as_text) == '{"secret": 1}'
    with pytest.raises(PersistenceError) as moved:
        unseal(conn, "runs", "output_json", ("run-2",), stored)
    assert moved.value.code == "encryption.key_mismatch"


def test_nonces_never_repeat_in_a_process_its_threads_or_a_forked_child() -> None:
    import threading

    from agentctl.store import keyring

    seen: list[bytes] = []

    def take() -> None:
        seen.extend(next_nonce() for _ in range(2000))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == len(set(seen)) == 8000 and {len(n) for n in seen} == {12}
    # A forked child draws its own prefix: it never goes on from the parent's counter.
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns about forking with threads alive
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, next_nonce())
        os._exit(0)
    os.close(write)
    child = os.read(read, 12)
    os.close(read)
    os.waitpid(pid, 0)
    mine = next_nonce()
    assert len(child) == 12 and child[:8] != mine[:8]
    # A counter about to wrap draws a new prefix rather than reuse a number.
    source = keyring._NonceSource()
    prefix, _ = source._state
    source._state = (prefix, itertools.count(2**32 - 1))
    last, after = source.next(), source.next()
    assert last == prefix + b"\xff\xff\xff\xff" and after[:8] != prefix


def test_sqlite_stores_seal_as_bytes_and_0014_converts_text_sealed_values(
    tmp_path: Path,
) -> None:
    """A SQLite database sealed by the previous release (text form) reads the same after
    the upgrade converts its values to bytes; a downgrade turns them back into text."""
    from agentctl.engine.run.outcome import finished_outcome
    from agentctl.store import migrate

    path = tmp_path / "old.db"
    with open_store(str(path)) as store:
        sealer = encryption_repo.activate_key(store, "k1", "K1_UNUSED", os.urandom(32))
        assert sealer.binary
    run_id = _roll_chain_sealed(path, sealer)
    with open_store(str(path)) as store:
        store.use_sealer(sealer)
        expected = finished_outcome(store, run_id)
        assert expected is not None and expected.state == "succeeded"
        with store.write() as conn:
            migrate.downgrade(conn, "0013_memory_sealed_text")
    kinds = _forms(path)
    assert kinds == {"text"}, kinds  # what the previous release held
    with open_store(str(path)) as store:  # upgrades on open
        assert store.revision() == migrate.head_revision()
        assert _forms(path) == {"blob"}
        store.use_sealer(sealer)
        again = finished_outcome(store, run_id)
        assert again is not None and again.output == expected.output
        inventory = encryption_repo.inventory(store)
        assert inventory["clearValues"] == 0 and inventory["sealedValues"] > 0


def _roll_chain_sealed(path: Path, sealer: Sealer) -> str:
    import asyncio

    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.executor import RunExecutor
    from agentctl.ids import IdGenerator, SystemClock

    workflow = path.parent / "chain.yaml"
    workflow.write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: chain}\nspec:\n"
        "  actions:\n    step: {kind: builtin.assign}\n  tasks:\n"
        "    - {id: s0, uses: 'action:step', with: {i: 0}}\n"
        "    - {id: s1, uses: 'action:step', with: {i: 1}, needs: [s0]}\n"
    )
    clock = SystemClock()
    with open_store(str(path)) as store:
        store.use_sealer(sealer)
        run_id = create_run(store, prepare_run(str(workflow)), clock=clock, ids=IdGenerator(clock))
        asyncio.run(RunExecutor(store, run_id, clock=clock).execute())
    return run_id


def _forms(path: Path) -> set[str]:
    """The SQLite storage classes of the sealed values in tasks, runs and audit events."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        found = set()
        for table, column in (
            ("tasks", "output_json"),
            ("runs", "output_json"),
            ("audit_events", "payload_json"),
        ):
            query = f"SELECT typeof({column}), {column} FROM {table} WHERE {column} IS NOT NULL"  # noqa: S608
            for kind, value in conn.execute(query):
                assert is_sealed(value), (table, column, value)
                found.add(kind)
        return found
    finally:
        conn.close()
