"""``agentctl artifacts list --blobs``: every blob with its size, age, refs and leases,
unreferenced ones included, and exactly the ones the next ``artifacts gc`` removes marked
(real runs, real SQLite, the real CLI)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: blobs}}
spec:
  policy: {{approval: never, writableRoots: [out]}}
  actions:
    save: {{kind: builtin.write}}
  tasks:
    - {{id: save, uses: "action:save", with: {{path: out/{name}.txt, content: "{content}"}}}}
"""


def _roll(cli: Any, tmp_path: Path, db: Path, name: str, content: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(WORKFLOW.format(name=name, content=content))
    result = cli("--output", "json", "roll", path, "--db", db, "--workspace", tmp_path)
    assert result.exit_code == 0, result.stderr
    return str(result.json()["data"]["runId"])


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blobs(cli: Any, db: Path, *extra: str) -> dict[str, dict[str, Any]]:
    result = cli("--output", "json", "artifacts", "list", "--blobs", "--db", db, *extra)
    assert result.exit_code == 0, result.stderr
    return {blob["digest"]: blob for blob in result.json()["data"]["blobs"]}


def test_blobs_are_listed_with_refs_leases_and_gc_fate(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "state" / "r.db"
    _roll(cli, tmp_path, db, "kept", "kept bytes")
    dropped = _roll(cli, tmp_path, db, "dropped", "dropped bytes")
    _roll(cli, tmp_path, db, "leased", "leased bytes")
    kept, gone, leased = (_digest(b) for b in (b"kept bytes", b"dropped bytes", b"leased bytes"))
    # Forget two runs (their refs go with them) and keep a live lease on one blob.
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM runs WHERE id = ?", (dropped,))
        conn.execute("DELETE FROM artifact_refs WHERE blob_digest = ?", (leased,))
        conn.execute(
            "INSERT INTO artifact_leases (id, blob_digest, holder, created_at, expires_at) "
            "VALUES ('lease-1', ?, 'test', '2026-01-01 00:00:00.000000', "
            "'2999-01-01 00:00:00.000000')",
            (leased,),
        )
    conn.close()
    # Bytes on disk that never got a row (a crash between publish and commit).
    stray = _digest(b"stray")
    hexdigest = stray.removeprefix("sha256:")
    folder = tmp_path / "state" / "artifacts" / "blobs" / hexdigest[:2]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hexdigest[2:]).write_bytes(b"stray")

    listed = _blobs(cli, db, "--older-than-days", "0")
    assert set(listed) == {kept, gone, leased, stray}
    assert (listed[kept]["refs"], listed[kept]["collectable"]) == (1, False)
    assert listed[kept]["size"] == len(b"kept bytes") and listed[kept]["present"]
    assert (listed[gone]["refs"], listed[gone]["collectable"]) == (0, True)
    assert (listed[leased]["leases"], listed[leased]["collectable"]) == (1, False)
    assert (listed[stray]["recorded"], listed[stray]["collectable"]) == (False, True)
    # With the default 30-day grace nothing this young is collectable.
    assert not any(blob["collectable"] for blob in _blobs(cli, db).values())

    human = cli("artifacts", "list", "--blobs", "--older-than-days", "0", "--db", db)
    assert "gc would remove" in human.stdout and "leased (1)" in human.stdout

    gc = cli("--output", "json", "artifacts", "gc", "--older-than-days", "0", "--db", db)
    assert gc.exit_code == 0, gc.stderr
    assert sorted(gc.json()["data"]["removedBlobs"]) == sorted([gone, stray])
    assert set(_blobs(cli, db, "--older-than-days", "0")) == {kept, leased}


def test_blobs_cannot_be_filtered_by_run(cli: Any, tmp_path: Path) -> None:
    result = cli("artifacts", "list", "--blobs", "--run", "r", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    assert "--blobs" in result.stderr
