"""A PostgreSQL driver session's statements, sent by libpq with little Python around them.

A claimed task runs some thirty store statements; psycopg's ``Cursor.execute`` spends about
as much of the worker's CPU in its own Python around each statement (a fresh transformer per
text, the query's conversion, the prepared-statement manager, result bookkeeping) as libpq
spends sending it and reading the answer. The store's statement texts are fixed (compiled
once per dialect, :mod:`agentctl.store.statements`), so :class:`ServerStatements` converts
each text once per connection, prepares it on the server once (as psycopg would after a
few executions) and then only dumps the parameters and executes the prepared statement.

It uses psycopg's own pieces, so nothing it sends or returns differs from the cursor's: the
parameters are dumped by psycopg's transformer (the same adapters and the same parameter
types, a prepared statement per text and types, as psycopg keys them), the rows are built
by the same loaders as plain tuples, the waiting is the connection's (interruptible), and a
failed statement raises the exception psycopg raises for its SQLSTATE, which the store's
one classifier (:func:`agentctl.store.errors.driver_error`) maps as before.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from psycopg import Connection, errors, pq
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg.generators import execute

__all__ = ["MAX_PREPARED", "ServerStatements"]

#: Prepared statements kept per connection; texts beyond it are sent unprepared. The
#: store has a few hundred statement texts and a process uses a fraction of them.
MAX_PREPARED = 512

_ROWS = pq.ExecStatus.TUPLES_OK
_DONE = pq.ExecStatus.COMMAND_OK
_EMPTY = pq.ExecStatus.EMPTY_QUERY
_FAILED = pq.ExecStatus.FATAL_ERROR

#: Names of this process's prepared statements (psycopg's own are ``_pg3_N``).
_NAMES = itertools.count(1)


class ServerStatements:
    """Runs statement texts on one psycopg connection (autocommit; the driver session
    sends its own BEGIN and COMMIT), each text converted once and prepared once."""

    __slots__ = ("connection", "_encoding", "_pgconn", "_prepared", "_queries", "_tx")

    def __init__(self, connection: Connection[Any]) -> None:
        self.connection = connection
        self._pgconn = connection.pgconn
        self._tx = Transformer(connection)
        self._encoding = connection.info.encoding
        #: text -> its query, whose parameters are dumped again for each execution
        self._queries: dict[str, PostgresQuery] = {}
        #: (query bytes, parameter types) -> the prepared statement's name
        self._prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}

    def run(self, statement: str, parameters: Sequence[Any]) -> tuple[list[Any], int]:
        """Execute ``statement`` with ``parameters``: its rows (tuples; none unless it
        returns rows) and its row count, as the cursor's ``fetchall`` and ``rowcount``."""
        pgconn = self._pgconn
        with self.connection.lock:
            query = self._queries.get(statement)
            if query is None:
                query = PostgresQuery(self._tx)
                query.convert(statement, parameters)
                self._queries[statement] = query
            else:
                query.dump(parameters)
            key = (query.query, query.types)
            name = self._prepared.get(key)
            if name is None and len(self._prepared) < MAX_PREPARED:
                name = f"agentctl_{next(_NAMES)}".encode()
                pgconn.send_prepare(name, query.query, param_types=query.types)
                self._check(self._wait())
                self._prepared[key] = name
            if name is None:
                pgconn.send_query_params(
                    query.query, query.params, param_formats=query.formats, param_types=query.types
                )
            else:
                pgconn.send_query_prepared(name, query.params, param_formats=query.formats)
            result = self._check(self._wait())
            if result.status == _ROWS:
                self._tx.set_pgresult(result)
                return self._tx.load_rows(0, result.ntuples, tuple), result.ntuples
            done = result.command_tuples
            return [], -1 if done is None else done

    def execute(self, text: str) -> None:
        """Send ``text`` (statements without parameters: a BEGIN and its advisory locks, a
        COMMIT) in one simple query, as the cursor's ``execute(text)`` does."""
        with self.connection.lock:
            self._pgconn.send_query(text.encode(self._encoding))
            self._check(self._wait())

    def _wait(self) -> list[pq.abc.PGresult]:
        results: list[pq.abc.PGresult] = self.connection.wait(execute(self._pgconn))
        return results

    def _check(self, results: list[pq.abc.PGresult]) -> pq.abc.PGresult:
        """The last result, once none failed (the cursor's check of its results)."""
        if not results:
            raise errors.InternalError("got no result from the query")
        for result in results:
            status = result.status
            if status == _FAILED:
                raise errors.error_from_result(result, encoding=self._encoding)
            if status not in (_ROWS, _DONE, _EMPTY):
                raise errors.InternalError(
                    f"unexpected result status from query: {pq.ExecStatus(status).name}"
                )
        return results[-1]
