"""A PostgreSQL driver session's statements, sent by libpq with little Python around them.

A claimed task runs some thirty store statements; psycopg's ``Cursor.execute`` spends about
as much of the worker's CPU in its own Python around each statement (a fresh transformer per
text, the query's conversion, result bookkeeping) as libpq spends sending it and reading the
answer. The store's statement texts are fixed (compiled once per dialect,
:mod:`agentctl.store.statements`), so :class:`ServerStatements` converts each text once per
connection and afterwards only dumps its parameters and sends it.

It does what the cursor does with psycopg's own pieces, so nothing it sends or returns
differs: the parameters are dumped by psycopg's transformer (the same adapters, the same
parameter types), a text is prepared on the server by the connection's own prepared-statement
manager (after a few executions; every prepared statement dropped after a ROLLBACK, as
psycopg does whichever way it is sent), the rows are built by the same loaders as plain
tuples, the waiting is the connection's (interruptible), and a failed statement raises the
exception psycopg raises for its SQLSTATE, which the store's one classifier
(:func:`agentctl.store.errors.driver_error`) maps as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Connection, errors, pq
from psycopg._preparing import Prepare
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg.generators import execute

__all__ = ["ServerStatements"]

_ROWS = pq.ExecStatus.TUPLES_OK
_DONE = pq.ExecStatus.COMMAND_OK
_EMPTY = pq.ExecStatus.EMPTY_QUERY
_FAILED = pq.ExecStatus.FATAL_ERROR
_NOT_PREPARED = Prepare.NO
_TO_PREPARE = Prepare.SHOULD


class ServerStatements:
    """Runs statement texts on one psycopg connection (autocommit; the driver session
    sends its own BEGIN and COMMIT), each text converted once."""

    __slots__ = ("connection", "_encoding", "_pgconn", "_queries", "_tx")

    def __init__(self, connection: Connection[Any]) -> None:
        self.connection = connection
        self._pgconn = connection.pgconn
        self._tx = Transformer(connection)
        self._encoding = connection.info.encoding
        #: text -> its query, whose parameters are dumped again for each execution
        self._queries: dict[str, PostgresQuery] = {}

    def run(self, statement: str, parameters: Sequence[Any] | None) -> tuple[list[Any], int]:
        """Execute ``statement`` with ``parameters``: its rows (tuples; none unless it
        returns rows) and its row count, as the cursor's ``fetchall`` and ``rowcount``.
        Without parameters the text may hold several statements (a simple query)."""
        connection, pgconn = self.connection, self._pgconn
        with connection.lock:
            query = self._queries.get(statement)
            if query is None:
                query = PostgresQuery(self._tx)
                query.convert(statement, parameters)
                self._queries[statement] = query
            else:
                query.dump(parameters)
            # The cursor's steps (psycopg's Cursor._maybe_prepare_gen), without the cursor.
            manager = connection._prepared
            prepare, name = manager.get(query)
            if prepare is _NOT_PREPARED:
                if query.params:
                    pgconn.send_query_params(
                        query.query,
                        query.params,
                        param_formats=query.formats,
                        param_types=query.types,
                    )
                else:
                    pgconn.send_query(query.query)
            else:
                if prepare is _TO_PREPARE:
                    pgconn.send_prepare(name, query.query, param_types=query.types)
                    self._check(self._wait())
                pgconn.send_query_prepared(name, query.params, param_formats=query.formats)
            key = manager.maybe_add_to_cache(query, prepare, name)
            results = self._wait()
            if key is not None:
                manager.validate(key, prepare, name, results)
            result = self._check(results)
            if manager._to_flush:  # statements to deallocate (all of them after a ROLLBACK)
                connection.wait(manager.maintain_gen(connection))
            if result.status == _ROWS:
                self._tx.set_pgresult(result)
                return self._tx.load_rows(0, result.ntuples, tuple), result.ntuples
            done = result.command_tuples
            return [], -1 if done is None else done

    def execute(self, text: str) -> None:
        """Send ``text`` (statements without parameters: a BEGIN and its advisory locks, a
        COMMIT), as the cursor's ``execute(text)`` does."""
        self.run(text, None)

    def _wait(self) -> list[pq.abc.PGresult]:
        results: list[pq.abc.PGresult] = self.connection.wait(execute(self._pgconn))
        return results

    def _check(self, results: list[pq.abc.PGresult]) -> pq.abc.PGresult:
        """The first result, once none failed (the cursor's check of its results)."""
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
        return results[0]
