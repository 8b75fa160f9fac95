"""The client's CPU per store statement on PostgreSQL: a driver session's
``exec_driver_sql`` (what a worker's hot path calls, rows taken) against the same texts
through a psycopg cursor (``execute`` and ``fetchall``) and a bare libpq round trip
(``pgconn.exec_params``, the floor), on a throwaway server started like the test suite's.

Two statements of the store, alternated: a count (one row) and a select by id (no row).
CPU is this process's (``process_time``), so load on the machine changes it little; the
server's is not counted. Prints one JSON line per round. ``BENCH_CHECKOUT=DIR`` measures
another checkout's agentctl (an A/B of ``driver_session_us``)::

    .venv/bin/python bench/pg_statement_bench.py --statements 3000 --rounds 3
    BENCH_CHECKOUT=/tmp/base .venv/bin/python bench/pg_statement_bench.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

CHECKOUT = Path(os.environ.get("BENCH_CHECKOUT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(CHECKOUT))

from agentctl.store import approvals_repo  # noqa: E402
from agentctl.store.engine import open_store  # noqa: E402
from tests.pg.cluster import start_cluster  # noqa: E402


def per_statement(run: Callable[[], None], statements: int) -> float:
    """Microseconds of CPU per statement; ``run`` sends two."""
    for _ in range(50):
        run()
    started = time.process_time()
    for _ in range(statements // 2):
        run()
    return (time.process_time() - started) * 1e6 / statements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cluster = start_cluster()
    try:
        store = open_store(cluster.create_database(template=None))
        count = approvals_repo._count.compiled("postgresql").text
        one = approvals_repo._approval.compiled("postgresql").text
        with store.driver_session() as session:
            cursor = session._session_cursor()
            pgconn = cursor.connection.pgconn

            def driver() -> None:
                session.exec_driver_sql(count, ("run-1", "pending")).first()
                session.exec_driver_sql(one, ("approval-1",)).first()

            def psycopg_cursor() -> None:
                cursor.execute(count, ("run-1", "pending"))
                cursor.fetchall()
                cursor.execute(one, ("approval-1",))
                cursor.fetchall()

            def libpq() -> None:
                pgconn.exec_params(b"SELECT 1", None)
                pgconn.exec_params(b"SELECT 1", None)

            for number in range(1, args.rounds + 1):
                line = {
                    "bench": "pg_statement",
                    "round": number,
                    "checkout": str(CHECKOUT),
                    "statements": args.statements,
                    "driver_session_us": round(per_statement(driver, args.statements), 1),
                    "psycopg_cursor_us": round(per_statement(psycopg_cursor, args.statements), 1),
                    "libpq_exec_params_us": round(per_statement(libpq, args.statements), 1),
                }
                print(json.dumps(line), flush=True)
        store.close()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
