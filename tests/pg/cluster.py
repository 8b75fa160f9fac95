"""A throwaway PostgreSQL cluster for the test session, from the server binaries on the
machine (Debian's ``postgresql`` package: ``/usr/lib/postgresql/<v>/bin/initdb``, ``pg_ctl``).

``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres`` user
(created by the package) and its commands run through ``runuser``. The server listens on
127.0.0.1 on a free port only, with trust authentication for one user, and durability
settings off (a test cluster is thrown away). ``AGENTCTL_TEST_POSTGRES_URL`` points the
tests at an existing server instead (its user must be allowed to create databases).

When no server can be had the PostgreSQL tests skip, except under ``CI=true`` or
``AGENTCTL_REQUIRE_POSTGRES=1``, where they fail: CI can never pass without running them.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

import pytest

__all__ = ["Cluster", "require_postgres", "start_cluster"]

USER = "agentctl"


def _required() -> bool:
    return (
        os.environ.get("CI", "").lower() == "true"
        or os.environ.get("AGENTCTL_REQUIRE_POSTGRES") == "1"
    )


def require_postgres(reason: str) -> None:
    """Skip (fail under CI) for lack of a PostgreSQL server."""
    if _required():
        pytest.fail(f"PostgreSQL tests cannot run: {reason} (required under CI)")
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def _bin_dir() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    """A server and the URL of its maintenance database."""

    admin_url: str
    directory: Path | None = None
    stop: list[str] | None = None
    template: str | None = None
    spare: list[str] = field(default_factory=list)
    #: ``pg_ctl … restart`` without its ``-m MODE`` (None for a server given by URL).
    restart_command: list[str] | None = None
    _names: count[int] = field(default_factory=lambda: count(1))

    def url(self, database: str) -> str:
        base, _, _ = self.admin_url.rpartition("/")
        return f"{base}/{database}"

    def create_database(self, prefix: str = "t", template: str | None = None) -> str:
        """A new empty database (or a copy of ``template``); returns its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            clause = f" TEMPLATE {template}" if template else ""
            conn.execute(f"CREATE DATABASE {name}{clause}")
        return self.url(name)

    def take_migrated(self) -> str:
        """A database at the current schema with no rows: a reused one when a previous
        test gave one back (emptying tables is much faster than CREATE DATABASE)."""
        if self.spare:
            return self.spare.pop()
        return self.create_database(template=self.template)

    def give_back(self, url: str) -> None:
        """Empty every table of ``url`` for the next test, or drop it when something still
        holds a lock on it (a process the test left behind)."""
        import psycopg

        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SET lock_timeout = '2s'")
                tables = [
                    row[0]
                    for row in conn.execute(
                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                        "AND tablename <> 'alembic_version'"
                    )
                ]
                conn.execute(
                    "TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE"
                )
        except psycopg.Error:
            self.drop_database(url)
            return
        self.spare.append(url)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rpartition("/")[2]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def restart(self, mode: str) -> None:
        """Restart the server (``fast``: sessions are told and closed; ``immediate``: it
        dies at once and recovers from its log), as an operator or a crash would."""
        assert self.restart_command is not None, "a server given by URL cannot be restarted"
        done = subprocess.run(
            [*self.restart_command, "-m", mode, "restart"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr or done.stdout

    def password_role(self, user: str, password: str) -> None:
        """A role that must log in with ``password`` (scram-sha-256) over TCP, allowed to
        create databases; every other user keeps trust authentication."""
        import psycopg

        assert self.directory is not None, "a server given by URL cannot be reconfigured"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {user} LOGIN CREATEDB PASSWORD '{password}'")
            hba = self.directory / "data" / "pg_hba.conf"
            hba.write_text(f"host all {user} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
            conn.execute("SELECT pg_reload_conf()")

    def shutdown(self) -> None:
        if self.stop is not None:
            subprocess.run(self.stop, capture_output=True, check=False, timeout=60)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_cluster(
    *,
    durable: bool = False,
    language: str | None = None,
    own: bool = False,
    listen: tuple[str, ...] = (),
    trust: str | None = None,
    preload: tuple[str, ...] = (),
) -> Cluster:
    """Start a server (or use ``AGENTCTL_TEST_POSTGRES_URL``); skips or fails when none.

    ``durable`` keeps the server's durability settings (benchmarks); tests turn them off.
    ``language`` (``de``, …) makes the server word its messages in that language (gettext's
    ``LANGUAGE``, the package's own translations), as a server with another
    ``lc_messages`` does. ``own`` always starts a server of its own (one a test restarts).
    ``listen`` adds addresses to 127.0.0.1 and ``trust`` a network whose clients are
    trusted (a benchmark's hosts in network namespaces it made; ``own`` is implied).
    ``preload`` names server libraries to load at start (a benchmark's
    ``pg_stat_statements``; ``own`` is implied)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        require_postgres("the psycopg driver is not installed (pip install -e '.[dev]')")
    given = os.environ.get("AGENTCTL_TEST_POSTGRES_URL")
    if given and not own and not listen and not preload:
        return Cluster(admin_url=given)
    bin_dir = _bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        require_postgres("no initdb/pg_ctl found (apt-get install -y postgresql)")
    assert bin_dir is not None
    as_user: list[str] = []
    directory = Path(tempfile.mkdtemp(prefix="agentctl-pg-"))
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(directory, ignore_errors=True)
            require_postgres("running as root and there is no 'postgres' user to run initdb")
        os.chown(directory, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data = directory / "data"
    port = _free_port()
    log = directory / "server.log"
    initdb = subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust"]
        + ["--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if initdb.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(f"initdb failed: {initdb.stderr or initdb.stdout}")
    if trust is not None:
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {trust} trust\n")
    addresses = ",".join(("127.0.0.1", *listen))
    options = f"-c listen_addresses={addresses} -c port={port} -k {directory}"
    options += " -c max_connections=200"
    if preload:
        options += f" -c shared_preload_libraries={','.join(preload)}"
    ctl = [str(bin_dir / "pg_ctl"), "-D", str(data)]
    if language is not None:
        options += " -c lc_messages=C.UTF-8"
        ctl = ["env", f"LANGUAGE={language}", *ctl]
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    started = subprocess.run(
        [*as_user, *ctl, "-l", str(log), "-o", options] + ["-w", "-t", "60", "start"],
        capture_output=True,
        text=True,
        check=False,
        timeout=90,
    )
    stop = [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
    if started.returncode != 0:
        detail = log.read_text(errors="replace") if log.exists() else started.stderr
        subprocess.run(stop, capture_output=True, check=False, timeout=60)
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {detail[-2000:]}")
    return Cluster(
        admin_url=f"postgresql://{USER}@127.0.0.1:{port}/postgres",
        directory=directory,
        stop=stop,
        restart_command=[*as_user, *ctl, "-l", str(log), "-w", "-t", "60"],
    )
