"""Random ingest / reference / release / delete-run / lease-expiry / gc sequences never
lose a referenced or leased blob, and gc eventually removes everything else."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from agentctl.artifacts import ArtifactStore, IngestedBlob
from agentctl.errors import TaskError
from agentctl.ids import FixedClock
from agentctl.store.engine import StoreSettings, open_store

CONTENTS = [b"alpha", b"beta", b"gamma", b"alpha" * 1000]


@dataclass
class Pending:
    blob: IngestedBlob
    expires: datetime


class ArtifactGcMachine(RuleBasedStateMachine):
    pending = Bundle("pending")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="artifact-sm-"))
        self.store = open_store(
            str(self.dir / "runtime.db"), settings=StoreSettings(synchronous="OFF")
        )
        # Ahead of the wall clock, so every file's mtime is in the clock's past.
        self.clock = FixedClock(datetime.now(UTC) + timedelta(days=1))
        self.artifacts = ArtifactStore.beside(self.store, self.clock)
        self.runs: list[str] = []
        self.run_counter = 0
        self.refs: dict[str, set[str]] = {}  # run id -> digests its refs point at
        self.leases: dict[str, tuple[str, datetime]] = {}  # lease id -> (digest, expiry)
        self.present: set[str] = set()  # digests whose bytes must be on disk
        self.source_counter = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- model helpers ---------------------------------------------------------------

    def _referenced(self) -> set[str]:
        return set().union(*self.refs.values()) if self.refs else set()

    def _leased(self) -> set[str]:
        now = self.clock.now()
        return {digest for digest, expires in self.leases.values() if expires > now}

    # -- rules -------------------------------------------------------------------------

    @initialize()
    def first_run(self) -> None:
        self.new_run()

    @rule()
    def new_run(self) -> None:
        self.run_counter += 1
        run_id = f"run-{self.run_counter}"
        with self.store.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json, "
                "status, created_at, updated_at) VALUES (?, 'wf', 'a', 'b', '{}', 'running', "
                "'2026-01-01 00:00:00.000000', '2026-01-01 00:00:00.000000')",
                (run_id,),
            )
        self.runs.append(run_id)
        self.refs[run_id] = set()

    @rule(target=pending, content=st.sampled_from(CONTENTS))
    def ingest(self, content: bytes) -> Pending:
        self.source_counter += 1
        source = self.dir / f"source-{self.source_counter}"
        source.write_bytes(content)
        blob = self.artifacts.ingest(source, holder="machine")
        expires = self.clock.now() + timedelta(hours=1)
        self.leases[blob.lease_id] = (blob.digest, expires)
        self.present.add(blob.digest)
        return Pending(blob, expires)

    @precondition(lambda self: bool(self.runs))
    @rule(item=consumes(pending), index=st.integers(0, 100), name=st.sampled_from("xyz"))
    def reference(self, item: Pending, index: int, name: str) -> None:
        run_id = self.runs[index % len(self.runs)]
        accepted = item.expires > self.clock.now() or item.blob.digest in self.present
        try:
            with self.store.write() as conn:
                ref = self.artifacts.record_ref(
                    conn, item.blob, run_id=run_id, task_id="t", name=name
                )
        except TaskError as error:
            assert not accepted, f"record_ref refused a blob that is still there: {error}"
            assert error.code == "artifact.lease_expired"
            self.leases.pop(item.blob.lease_id, None)
            return
        assert accepted, "record_ref accepted a blob gc had removed"
        assert ref.digest == item.blob.digest
        self.leases.pop(item.blob.lease_id, None)
        self.refs[run_id].add(item.blob.digest)

    @rule(item=consumes(pending))
    def release(self, item: Pending) -> None:
        with self.store.write() as conn:
            self.artifacts.release(conn, [item.blob])
        self.leases.pop(item.blob.lease_id, None)

    @precondition(lambda self: bool(self.runs))
    @rule(index=st.integers(0, 100))
    def delete_run(self, index: int) -> None:
        run_id = self.runs.pop(index % len(self.runs))
        with self.store.write() as conn:
            conn.exec_driver_sql("DELETE FROM runs WHERE id = ?", (run_id,))
        del self.refs[run_id]

    @rule(minutes=st.sampled_from([10, 59, 61, 120]))
    def advance_clock(self, minutes: int) -> None:
        self.clock.advance(minutes * 60)

    @rule(dry_run=st.booleans(), days=st.sampled_from([0, 30]))
    def gc(self, dry_run: bool, days: int) -> None:
        report = self.artifacts.gc(older_than_days=days, dry_run=dry_run)
        reachable = self._referenced() | self._leased()
        # The clock never gets 30 days ahead here, so only days=0 removes blobs.
        expected = set() if days else self.present - reachable
        assert set(report.removed_blobs) == expected
        if not dry_run:
            self.present -= expected
            now = self.clock.now()
            self.leases = {k: v for k, v in self.leases.items() if v[1] > now}

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def referenced_and_leased_bytes_are_intact(self) -> None:
        must_exist = self._referenced() | self._leased()
        on_disk = {digest for digest, _ in self.artifacts.layout.iter_blobs()}
        assert must_exist <= on_disk, f"lost blobs: {must_exist - on_disk}"
        assert on_disk == self.present
        with self.store.read() as conn:
            assert self.artifacts.reuse_check(conn, self.artifacts.refs()) == []

    @invariant()
    def no_temporary_files_or_quarantine_left(self) -> None:
        for folder in (self.artifacts.layout.tmp, self.artifacts.layout.quarantine):
            assert not folder.exists() or list(folder.iterdir()) == []


# Each example keeps its 30 steps; `make test` runs 25 of them (40 took a minute of the
# suite on a loaded machine), AGENTCTL_SOAK=1 runs 400.
ArtifactGcMachine.TestCase.settings = settings(
    max_examples=400 if os.environ.get("AGENTCTL_SOAK") == "1" else 25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestArtifactGc = pytest.mark.slow(ArtifactGcMachine.TestCase)
