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

:meth:`ServerStatements.pipeline` sends several statements in one round trip (libpq's
pipeline mode): a transaction's ``BEGIN`` with its advisory locks, a claimed task's fence
with its ``COMMIT``. Each statement is prepared as :meth:`~ServerStatements.run` prepares
it (so a lock statement is planned once per connection, not at every ``BEGIN``), the
statements run in order, and one that fails aborts those after it up to the pipeline's end:
a ``COMMIT`` sent after a failed statement never commits, and the failure raises the
same psycopg exception as when the statement runs alone.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from psycopg import Connection, errors, pq
from psycopg._preparing import Prepare
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg.generators import execute, fetch_many, send

__all__ = ["ServerStatements"]

_ROWS = pq.ExecStatus.TUPLES_OK
_DONE = pq.ExecStatus.COMMAND_OK
_EMPTY = pq.ExecStatus.EMPTY_QUERY
_FAILED = pq.ExecStatus.FATAL_ERROR
_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_CONNECTED = pq.ConnStatus.OK

#: One statement of a pipeline: its text and its parameters (None: none).
Step = tuple[str, Sequence[Any] | None]
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

    def pipeline(self, steps: Sequence[Step]) -> list[tuple[list[Any], int]]:
        """Execute ``steps`` in order in one round trip: each one's rows and row count, as
        :meth:`run` gives them. A step that fails raises its psycopg exception once every
        result was read (the steps after it were not executed: the server skips them up
        to the pipeline's end). Statements with small parameters only (a ``BEGIN``, lock
        keys, a fence): everything is sent before anything is read."""
        connection, pgconn = self.connection, self._pgconn
        manager = connection._prepared
        with connection.lock:
            pgconn.enter_pipeline_mode()
            try:
                sent = [self._send_in_pipeline(*step) for step in steps]
                pgconn.pipeline_sync()
                answers = connection.wait(_pipelined(pgconn, sent))
            finally:
                # A lost connection stays in pipeline mode; it is never used again.
                if pgconn.status == _CONNECTED and not pgconn.is_busy():
                    pgconn.exit_pipeline_mode()
            failed: pq.abc.PGresult | None = None
            out: list[tuple[list[Any], int]] = []
            for (query, key, prepare, name), (prepared, results) in zip(sent, answers, strict=True):
                if key is not None:
                    manager.validate(key, prepare, name, results)
                if _failed(prepared) or _failed(results):
                    if prepare is _TO_PREPARE:
                        # Named, perhaps never prepared (a step before it failed): the
                        # text is prepared afresh under a new name when it runs again.
                        manager._names.pop(manager.key(query), None)
                    if failed is None:
                        failed = next((r for r in prepared + results if r.status == _FAILED), None)
                    out.append(([], -1))
                    continue
                if not results:
                    raise errors.InternalError("got no result from the query")
                result = results[0]
                if result.status == _ROWS:
                    self._tx.set_pgresult(result)
                    out.append((self._tx.load_rows(0, result.ntuples, tuple), result.ntuples))
                else:
                    done = result.command_tuples
                    out.append(([], -1 if done is None else done))
            if failed is not None:
                raise errors.error_from_result(failed, encoding=self._encoding)
            if manager._to_flush:  # statements to deallocate (all of them after a ROLLBACK)
                connection.wait(manager.maintain_gen(connection))
            return out

    def _send_in_pipeline(
        self, statement: str, parameters: Sequence[Any] | None
    ) -> tuple[PostgresQuery, Any, Prepare, bytes]:
        """Queue one statement of a pipeline, prepared as :meth:`run` prepares it (its
        PREPARE queued before it, in the same round trip)."""
        query = self._queries.get(statement)
        if query is None:
            query = PostgresQuery(self._tx)
            query.convert(statement, parameters)
            self._queries[statement] = query
        else:
            query.dump(parameters)
        manager, pgconn = self.connection._prepared, self._pgconn
        prepare, name = manager.get(query)
        if prepare is _NOT_PREPARED:
            pgconn.send_query_params(
                query.query, query.params, param_formats=query.formats, param_types=query.types
            )
        else:
            if prepare is _TO_PREPARE:
                pgconn.send_prepare(name, query.query, param_types=query.types)
            pgconn.send_query_prepared(name, query.params, param_formats=query.formats)
        return query, manager.maybe_add_to_cache(query, prepare, name), prepare, name

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


def _pipelined(
    pgconn: pq.abc.PGconn, sent: Sequence[tuple[PostgresQuery, Any, Prepare, bytes]]
) -> Generator[Any, Any, list[tuple[list[pq.abc.PGresult], list[pq.abc.PGresult]]]]:
    """Flush a pipeline and read its results: per step its results (a PREPARE's before its
    execution's), then the pipeline's sync."""
    yield from send(pgconn)
    answers: list[tuple[list[pq.abc.PGresult], list[pq.abc.PGresult]]] = []
    for _query, _key, prepare, _name in sent:
        prepared: list[pq.abc.PGresult] = []
        if prepare is _TO_PREPARE:
            prepared = yield from fetch_many(pgconn)
        results = yield from fetch_many(pgconn)
        answers.append((prepared, results))
    yield from fetch_many(pgconn)  # the sync
    return answers


def _failed(results: Sequence[pq.abc.PGresult]) -> bool:
    """Whether a step's results hold its failure, or its skipping after an earlier one's."""
    return any(r.status == _FAILED or r.status == _ABORTED for r in results)
