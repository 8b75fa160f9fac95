"""``agentctl db check``: is this database sound, and are its promises kept?

Four checks, each reported on its own: SQLite's page-level ``integrity_check``, the
foreign keys, every run's hash-chained audit log, and the bytes of every artifact blob
(content addresses re-hashed). Damage marks the database so no run starts on it until a
later check finds it sound again (agentctl/store/health.py).
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated

from pydantic import Field, computed_field
from pydantic.dataclasses import dataclass

from agentctl.ids import Clock
from agentctl.observability.audit import verify_chain
from agentctl.observability.audit_lanes import verify_lanes
from agentctl.store import audit_repo, health
from agentctl.store.engine import Store
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

__all__ = ["AuditChainsChecked", "BlobsChecked", "DatabaseCheck", "check_database"]


@dataclass(slots=True, config=CAMEL)
class AuditChainsChecked(CamelRecord):
    checked: int = 0
    broken: list[str] = field(default_factory=list)


@dataclass(slots=True, config=CAMEL)
class BlobsChecked(CamelRecord):
    checked: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass(slots=True, config=CAMEL)
class DatabaseCheck(CamelRecord):
    """What ``db check`` found, filled in check by check."""

    path: str
    integrity: list[str] = field(default_factory=list)
    foreign_keys: Annotated[list[str], Field(alias="foreignKeyViolations")] = field(
        default_factory=list
    )
    audit_chains: AuditChainsChecked = field(default_factory=AuditChainsChecked)
    artifact_blobs: BlobsChecked = field(default_factory=BlobsChecked)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def damaged(self) -> bool:
        return self.integrity != ["ok"] or bool(self.foreign_keys)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return (
            not self.damaged and not self.audit_chains.broken and not self.artifact_blobs.problems
        )

    _order = keys_in_order("path", "ok", "damaged")

    def findings(self) -> list[str]:
        found = [f"integrity: {line}" for line in self.integrity if line != "ok"]
        found += [f"foreign key: {line}" for line in self.foreign_keys]
        found += [f"audit: {line}" for line in self.audit_chains.broken]
        found += [f"artifact: {line}" for line in self.artifact_blobs.problems]
        return found


def check_database(store: Store, clock: Clock) -> DatabaseCheck:
    from agentctl.artifacts import ArtifactStore

    report = DatabaseCheck(path=store.path)
    sqlite = health.sqlite_check(store)
    report.integrity, report.foreign_keys = sqlite.integrity, sqlite.foreign_keys
    if not report.damaged:
        with store.read() as conn:
            run_ids = audit_repo.audited_runs(conn)
            for run_id in run_ids:
                chain = verify_chain(conn, run_id)
                if not chain.ok:
                    report.audit_chains.broken.append(
                        f"run {run_id}: event {chain.broken_at}: {chain.problem}"
                    )
                lanes = verify_lanes(conn, run_id)  # claimed tasks' events not adopted yet
                if not lanes.ok:
                    report.audit_chains.broken.append(
                        f"run {run_id}: lane of task {lanes.task_id} (claim token "
                        f"{lanes.claim_token}): lane event {lanes.lane_seq}: {lanes.problem}"
                    )
        report.audit_chains.checked = len(run_ids)
        verified = ArtifactStore.beside(store, clock).verify(None)
        report.artifact_blobs = BlobsChecked(
            verified.checked, [problem.message for problem in verified.problems]
        )
    if report.damaged:
        health.mark_damaged(store.path, report.findings())
    else:
        health.clear_damage(store.path)
    return report
