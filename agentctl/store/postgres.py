"""Opening a PostgreSQL store (psycopg 3): connection settings, transactions, migration.

The same Alembic history and the same repositories as SQLite (see
:mod:`agentctl.store.dialect` for what is rewritten). Settings and why:

- every session runs in UTC, so the store's naive UTC timestamp text is read as the instant
  it names, and values come back as UTC;
- ``lock_timeout`` equals SQLite's busy timeout (``AGENTCTL_SQLITE_BUSY_TIMEOUT_MS``,
  10 s by default): a writer waits for the write lock that long, then fails with
  ``store.locked`` instead of waiting forever;
- write transactions take the advisory locks of their scope first
  (:mod:`agentctl.store.locks`): a run's writes that run's lock, any other write the whole
  store; so the fencing check, guarded transitions and claims decide on rows no other
  writer can change before the commit, and the writes of different runs do not wait for
  each other;
- the workers' task claims and outcomes begin a plain ``BEGIN`` (``READ COMMITTED``, no
  advisory lock, see ``Store.row_write``): each decides on its rows with row locks, and
  taking the one write lock made every claim and outcome of every worker queue behind
  every other write;
- read transactions are ``REPEATABLE READ``: one consistent snapshot, like SQLite's;
- every transaction begins in one round trip: connections are in autocommit at the
  driver and the ``begin`` hook sends ``BEGIN ISOLATION LEVEL REPEATABLE READ``, or
  ``BEGIN`` and the advisory locks in one simple query (where psycopg's own implicit
  ``BEGIN`` and then the lock would take two). A worker executes several transactions per
  task, each a round trip to the server at least, so these are what a task costs;
- a pooled connection is checked with a ping only when it has been idle for
  :data:`PING_AFTER_IDLE_SECONDS` (a server restarted while it sat in the pool); pinging on
  every checkout cost a round trip per transaction. The pool hands out the most recently
  used connection first, so busy connections stay busy and idle ones are the checked ones.
  Between driver sessions a store keeps the connections given back idle for up to a
  second, out of the pool (``Store._server_connection``); one that goes back to the pool
  counts as idle from its last session, so the ping still sees how long it sat.

psycopg is imported only when a PostgreSQL URL is opened; without it the error says which
package to install.
"""

from __future__ import annotations

import importlib.util
import time
from typing import TYPE_CHECKING, Any

from agentctl.errors import PersistenceError
from agentctl.redaction import masked_url
from agentctl.store import dialect, migrate
from agentctl.store.runner import KEPT_SINCE, Store

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from agentctl.store.runner import StoreSettings

__all__ = ["PING_AFTER_IDLE_SECONDS", "make_engine", "open_postgres_store", "redact"]

#: A pooled connection idle for longer than this is pinged before it is handed out.
PING_AFTER_IDLE_SECONDS = 2.0


def redact(url: str) -> str:
    """``url`` with its password hidden, for messages and ``store.path``."""
    return masked_url(url)


def _require_driver() -> None:
    if importlib.util.find_spec("psycopg") is None:
        raise PersistenceError(
            "a postgresql:// database needs the psycopg driver, which is not installed",
            code="store.driver_missing",
            hint="install it with `pip install 'agentctl[postgres]'` (psycopg[binary])",
        )


def make_engine(url: str, settings: StoreSettings) -> Engine:
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import Connection, make_url
    from sqlalchemy.exc import DisconnectionError

    target = make_url(url).set(drivername="postgresql+psycopg")
    options = f"-c timezone=UTC -c lock_timeout={int(settings.busy_timeout_ms)}"
    # A worker executing N runs holds one connection per run, plus short-lived ones: keep
    # 5 idle, open more as needed rather than making a busy worker wait for the pool.
    engine = create_engine(
        target,
        connect_args={"options": options},
        pool_size=5,
        max_overflow=64,
        pool_use_lifo=True,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Transactions are begun by the "begin" hook below, in one round trip.
        dbapi_conn.autocommit = True

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        # A connection a store kept between its sessions has been idle since it was
        # given back by the last one (Store._server_connection).
        kept = record.info.pop(KEPT_SINCE, None)
        record.info["agentctl_idle_since"] = time.monotonic() if kept is None else kept

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("agentctl_idle_since")
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            dbapi_conn.execute(";")
        except Exception as exc:  # noqa: BLE001 - any failure: the pool opens a new one
            raise DisconnectionError(f"pooled connection is gone: {exc}") from exc

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        kind = options.get("agentctl_begin", dialect.WRITE)
        scope = options.get("agentctl_locks")
        conn.exec_driver_sql(dialect.begin_statement(dialect.POSTGRESQL, kind, scope))

    return engine


def open_postgres_store(url: str, *, migrate_schema: bool, settings: StoreSettings) -> Store:
    """Connect to (never create) the database at ``url`` and upgrade its schema.

    A database at a revision this code does not know is refused before anything is
    written; the upgrade runs in one write transaction under the write lock, so two
    processes opening a new database at once migrate it exactly once.
    """
    _require_driver()
    store = Store(make_engine(url, settings), redact(url))
    try:
        with store.read() as conn:
            found = migrate.current_revision(conn)
        migrate.require_known_revision(found, store.path)
        if migrate_schema and found != migrate.SCHEMA_HEAD:
            with store.write() as conn:
                current = migrate.current_revision(conn)
                migrate.require_known_revision(current, store.path)
                if current != migrate.head_revision():
                    migrate.upgrade(conn)
    except BaseException:
        store.close()
        raise
    return store
