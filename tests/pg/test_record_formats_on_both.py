"""The newer-format probe (store/records.py) on a SQLite file and on PostgreSQL: a run any
of whose records was written in a newer format is refused, naming the record."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import insert

from agentctl.errors import NewerFormatError
from agentctl.store.audit_tables import checkpoints
from agentctl.store.engine import open_store
from agentctl.store.records import check_run_records
from agentctl.store.run_tables import runs

NOW = datetime(2026, 1, 1)


def test_a_record_in_a_newer_format_is_found_by_the_probe(database: str) -> None:
    with open_store(database) as store:
        with store.write() as conn:
            for run_id in ("run-ok", "run-new"):
                conn.execute(
                    insert(runs).values(
                        id=run_id,
                        workflow_name="wf",
                        workflow_digest="sha256:a",
                        plan_digest="sha256:b",
                        plan_json="{}",
                        status="running",
                        created_at=NOW,
                        updated_at=NOW,
                    )
                )
                conn.execute(
                    insert(checkpoints).values(
                        run_id=run_id,
                        seq=7,
                        format_version=99 if run_id == "run-new" else 1,
                        transition="t",
                        checksum="c",
                        created_at=NOW,
                    )
                )
        with store.read() as conn:
            check_run_records(conn, "run-ok")
            with pytest.raises(NewerFormatError, match=r"checkpoint run-new/7 .*version 99"):
                check_run_records(conn, "run-new")
