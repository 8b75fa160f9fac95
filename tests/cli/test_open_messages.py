"""Opening a database or a workflow names the real cause, and reading creates nothing.

A lock, a read-only mount, a missing permission, damage and a file that is not SQLite at
all each get their own code and next step; a valid database is never called "not an
agentctl database". Commands that read (or act on existing records) refuse a missing
database with exit 5 and create no file; a missing workflow file is said to be missing.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ASK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
  tasks:
    - {id: env, uses: action:ask, with: {prompt: "Where?"}}
"""


def _error(result: Any) -> dict[str, Any]:
    assert "Traceback" not in result.stderr
    return dict(result.error_json()["error"])


def _made_db(cli: Any, tmp_path: Path) -> Path:
    db = tmp_path / "made.db"
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(ASK)
    assert cli("roll", workflow, "--db", db).exit_code == 3
    return db


EFFECT = "e" * 64

# Every command with --db that reads or acts on records that must already exist, with
# arguments that would get it past parsing. A command with --db appears either here or in
# CREATING (a test below keeps the two lists complete), so a new reading command cannot
# forget to refuse a missing database.
READING: dict[tuple[str, ...], list[str]] = {
    ("approvals", "answer"): ["approval-0123456789abcdef", '"yes"'],
    ("approvals", "approve"): ["approval-0123456789abcdef", "--reason", "ok"],
    ("approvals", "list"): [],
    ("approvals", "reject"): ["approval-0123456789abcdef", "--reason", "no"],
    ("artifacts", "export"): ["sha256:" + "0" * 64, "out.txt"],
    ("artifacts", "gc"): ["--dry-run"],
    ("artifacts", "inspect"): ["sha256:" + "0" * 64],
    ("artifacts", "list"): [],
    ("artifacts", "verify"): ["--all"],
    ("artifacts", "versions"): ["report"],
    ("audit",): ["run-x"],
    ("cancel",): ["run-x"],
    ("compensate",): ["run-x", "--plan"],
    ("db", "check"): [],
    ("db", "encryption", "enable"): ["--key-id", "k1", "--key-env", "AGENTCTL_KEY"],
    ("db", "encryption", "inventory"): [],
    ("db", "encryption", "rotate"): ["--key-id", "k2", "--key-env", "AGENTCTL_KEY"],
    ("db", "stats"): [],
    ("effects", "continue-remote"): [EFFECT, "--reason", "r", "--approved"],
    ("effects", "inspect"): [EFFECT],
    ("effects", "list"): ["run-x"],
    ("effects", "reconcile"): [EFFECT, "--status", "applied", "--reason", "r", "--approved"],
    ("fork",): ["run-x"],
    ("gc",): ["--dry-run"],
    ("inspect",): ["run-x"],
    ("memory", "get"): ["n", "k"],
    ("memory", "reindex"): ["n"],
    ("memory", "search"): ["n", "query"],
    ("monitor", "list"): [],
    ("monitor", "pause"): ["docs"],
    ("monitor", "remove"): ["docs"],
    ("monitor", "resume"): ["docs"],
    ("monitor", "show"): ["docs"],
    ("reconcile",): ["--list"],
    ("repair",): ["WF", "run-x", "--from", "env", "--plan"],
    ("replay",): ["run-x"],
    ("resume",): ["run-x"],
    ("retry",): ["WF", "run-x", "--failed", "--plan"],
    ("runs", "analyze"): ["run-x"],
    ("runs", "list"): [],
    ("runs", "upgrade"): ["run-x", "--dry-run"],
    ("runs", "wait"): ["run-x"],
    ("schedule", "list"): [],
    ("schedule", "pause"): ["nightly"],
    ("schedule", "remove"): ["nightly"],
    ("schedule", "resume"): ["nightly"],
    ("schedule", "show"): ["nightly"],
    ("schedule", "trigger"): ["nightly"],
    ("sessions", "list"): [],
    ("sessions", "show"): ["run-x", "review"],
    ("ui",): ["--port", "0"],
    ("watch",): ["run-x"],
    ("worker",): [],
    ("workflows", "list"): [],
    ("workflows", "show"): ["asking"],
}

# Commands that make records where none need exist yet: the database is created for them.
CREATING = {
    ("daemon",),
    ("db", "migrate"),
    ("memory", "put"),
    ("monitor", "add"),
    ("roll",),
    ("run",),
    ("schedule", "add"),
}


def _commands_with_db() -> set[tuple[str, ...]]:
    from typer.main import get_command

    from agentctl.cli.app import app

    found: set[tuple[str, ...]] = set()

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):  # a group
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        elif any("--db" in getattr(p, "opts", ()) for p in command.params):
            found.add(path)

    walk(get_command(app), ())
    return found


def test_every_command_with_a_database_is_classified() -> None:
    assert not set(READING) & CREATING
    assert _commands_with_db() == set(READING) | CREATING


@pytest.mark.parametrize("path", sorted(READING), ids=" ".join)
def test_reading_commands_never_create_a_database(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...]
) -> None:
    workflow = tmp_path / "work" / "workflows" / "asking.yaml"
    workflow.parent.mkdir()
    workflow.write_text(ASK)
    args = [str(workflow) if a == "WF" else a for a in READING[path]]
    typo = tmp_path / "typo.db"
    result = cli("--output", "json", *path, *args, "--db", typo)
    assert result.exit_code == 5, result.stderr
    error = _error(result)
    assert error["code"] == "store.missing"
    assert error["message"] == f"no agentctl database at {typo}"
    assert "`agentctl roll` creates the database" in error["hint"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "work"]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["workflows"]
    # The default database (.agentctl/runtime.db in the current directory) is not made
    # either, and the human form names it.
    human = cli(*path, *args)
    default = tmp_path / "work" / ".agentctl" / "runtime.db"
    if path in LISTS_WITHOUT_RUNS:
        assert human.exit_code == 0, human.stderr
        assert "never run" in human.stdout
    else:
        assert human.exit_code == 5
        assert human.stderr.splitlines()[0] == f"error: no agentctl database at {default}"
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["workflows"]


# Listing the project's workflow files needs no database: before the first run (no default
# database yet) they are listed as never run; a database named with --db must exist.
LISTS_WITHOUT_RUNS = {("workflows", "list"), ("workflows", "show")}


def test_the_workflows_list_an_unknown_name_suggests_works_before_any_run(
    cli: Any, tmp_path: Path
) -> None:
    workflow = tmp_path / "work" / "workflows" / "asking.yaml"
    workflow.parent.mkdir()
    workflow.write_text(ASK)
    unknown = cli("roll", "askng")
    assert unknown.exit_code == 2 and "`agentctl workflows list` shows all" in unknown.stderr
    listed = cli("--output", "json", "workflows", "list")  # the hinted command
    assert listed.exit_code == 0, listed.stderr
    (entry,) = listed.json()["data"]["workflows"]
    assert entry["name"] == "asking" and entry["lastRun"] is None
    assert not (tmp_path / "work" / ".agentctl").exists()
    assert cli("roll", "asking").exit_code == 3
    again = cli("--output", "json", "workflows", "list").json()["data"]["workflows"]
    assert again[0]["lastRun"]["state"] == "paused"


def test_writing_commands_still_create_the_database(cli: Any, tmp_path: Path) -> None:
    assert _made_db(cli, tmp_path).is_file()
    fresh = tmp_path / "fresh.db"
    assert cli("memory", "put", "n", "k", '"v"', "--db", fresh).exit_code == 0
    assert cli("--output", "json", "runs", "list", "--db", fresh).json()["data"]["runs"] == []


def test_text_file_is_not_sqlite_and_is_left_alone(cli: Any, tmp_path: Path) -> None:
    junk = tmp_path / "notes.db"
    junk.write_text("shopping list\n" * 200)
    before = junk.read_bytes()
    error = _error(cli("--output", "json", "runs", "list", "--db", junk))
    assert error["code"] == "store.not_a_database"
    assert "not an SQLite database" in error["message"]
    assert "move" not in error["hint"]
    assert junk.read_bytes() == before


def test_damaged_sqlite_file_is_called_damaged(cli: Any, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 8000)
    error = _error(cli("--output", "json", "runs", "list", "--db", damaged))
    assert error["code"] == "store.corrupt"
    assert "is damaged" in error["message"]
    assert "backup" in error["hint"] and "move" not in error["hint"]


def test_database_locked_at_open_is_named_locked(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _made_db(cli, tmp_path)
    monkeypatch.setenv("AGENTCTL_SQLITE_BUSY_TIMEOUT_MS", "50")
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        # Exclusive locking mode keeps even readers out, as a foreign tool might.
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("CREATE TABLE hold (x)")
        result = cli("--output", "json", "runs", "list", "--db", db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    error = _error(result)
    assert result.exit_code == 5
    assert error["code"] == "store.locked", error
    assert "not an agentctl database" not in error["message"]
    assert cli("runs", "list", "--db", db).exit_code == 0  # the retry the hint suggests


def _agentctl(*args: str | Path) -> str:
    return " ".join([sys.executable, "-m", "agentctl", "--output", "json", *map(str, args)])


def _read_only_mount(tmp_path: Path, prepare: str, then: str) -> Any:
    """Roll a paused run into a database on a tmpfs, run ``prepare``, remount the tmpfs
    read-only and run ``then`` (``$DB`` is the database, ``$RUN`` the run), inside a
    private user and mount namespace: nothing outside the test sees the mount."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(
        ["unshare", "-rm", "true"], capture_output=True, text=True, check=False, timeout=30
    )
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here: {probe.stderr.strip()}")
    mount = tmp_path / "mnt"
    mount.mkdir()
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(ASK)
    db = mount / "r.db"
    pick = f"{sys.executable} -c \"import json,sys; print(json.load(sys.stdin)['data']['runId'])\""
    script = (
        f"set -e; mount -t tmpfs -o size=8m tmpfs {mount}; DB={db}; "
        f"RUN=$({_agentctl('roll', workflow, '--db', db)} | {pick} || true); "
        f"{prepare}; mount -o remount,ro {mount}; {then}"
    )
    env = {**os.environ, "AGENTCTL_HOME": str(tmp_path / "home")}
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )


def test_read_only_mount_reads_and_names_the_mount_for_writes(tmp_path: Path) -> None:
    listed = _read_only_mount(tmp_path, "true", _agentctl("runs", "list", "--db", "$DB"))
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["data"]["runs"]) == 1
    (tmp_path / "again").mkdir()
    resumed = _read_only_mount(
        tmp_path / "again", "true", _agentctl("resume", "$RUN", "--db", "$DB")
    )
    assert resumed.returncode == 5, resumed.stderr
    error = json.loads(resumed.stderr)["error"]
    assert error["code"] == "store.read_only"
    assert "read-only file system" in error["message"]
    assert "remount" in error["hint"]


def test_read_only_mount_with_a_write_ahead_log_is_not_called_foreign(tmp_path: Path) -> None:
    # A WAL left without its index (copied mid-run, say) cannot be read on a read-only
    # mount; that is the cause to report, not "not an agentctl database".
    keep_wal = (
        f"{sys.executable} -c \"import sqlite3,os; c=sqlite3.connect('$DB'); "
        "c.execute('pragma wal_autocheckpoint=0'); c.execute('create table extra(x)'); "
        'c.commit(); os._exit(0)"; rm -f $DB-shm'
    )
    result = _read_only_mount(tmp_path, keep_wal, _agentctl("runs", "list", "--db", "$DB"))
    assert result.returncode == 5, result.stderr
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "store.read_only"
    assert "read-only file system" in error["message"] and "r.db-wal" in error["message"]
    assert "not an agentctl database" not in error["message"]
    assert "move" not in error["hint"]


def _without_folder_permissions(command: list[str]) -> list[str]:
    """``command`` run so that a folder of mode 000 is refused to it, whatever the checkout's
    permissions: as another user it could not import the checkout's virtual environment (a
    home of mode 0700, any ``mktemp -d``), so root keeps its uid and only loses the two
    capabilities that read past a folder's mode; anyone else is refused by the mode alone."""
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("root reads any folder unless setpriv drops CAP_DAC_OVERRIDE")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"] + command


def test_folder_without_permission_is_named(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    private.chmod(0)
    try:
        result = subprocess.run(
            _without_folder_permissions(
                [
                    sys.executable,
                    "-m",
                    "agentctl",
                    "--output",
                    "json",
                    "runs",
                    "list",
                    "--db",
                    str(private / "r.db"),
                ]
            ),
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "AGENTCTL_HOME": str(tmp_path / "home")},
        )
    finally:
        private.chmod(0o700)
    assert result.returncode == 5, result.stderr
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "store.permission"
    assert "permission denied" in error["message"]
    assert str(private) in error["message"]


def test_missing_workflow_file_is_said_to_be_missing(cli: Any, tmp_path: Path) -> None:
    for command in (["roll"], ["check"], ["plan"]):
        result = cli("--output", "json", *command, tmp_path / "nope.yaml")
        assert result.exit_code == 2, result.stderr
        error = _error(result)
        assert error["code"] == "workflow.missing_file"
        assert error["message"] == f"workflow file {tmp_path / 'nope.yaml'} does not exist"
        assert "schema" not in error["hint"]
