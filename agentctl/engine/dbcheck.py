"""``agentctl db check``: is this database sound, and are its promises kept?

Four checks, each reported on its own: SQLite's page-level ``integrity_check``, the
foreign keys, every run's hash-chained audit log, and the bytes of every artifact blob
(content addresses re-hashed). Damage marks the database so no run starts on it until a
later check finds it sound again (agentctl/store/health.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentctl.ids import Clock
from agentctl.observability.audit import verify_chain
from agentctl.store import audit_repo, health
from agentctl.store.engine import Store

__all__ = ["DatabaseCheck", "check_database"]


@dataclass
class DatabaseCheck:
    path: str
    integrity: list[str] = field(default_factory=list)
    foreign_keys: list[str] = field(default_factory=list)
    audit_runs: int = 0
    audit_breaks: list[str] = field(default_factory=list)
    blobs_checked: int = 0
    blob_problems: list[str] = field(default_factory=list)

    @property
    def damaged(self) -> bool:
        return self.integrity != ["ok"] or bool(self.foreign_keys)

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.audit_breaks and not self.blob_problems

    def findings(self) -> list[str]:
        found = [f"integrity: {line}" for line in self.integrity if line != "ok"]
        found += [f"foreign key: {line}" for line in self.foreign_keys]
        found += [f"audit: {line}" for line in self.audit_breaks]
        found += [f"artifact: {line}" for line in self.blob_problems]
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "damaged": self.damaged,
            "integrity": self.integrity,
            "foreignKeyViolations": self.foreign_keys,
            "auditChains": {"checked": self.audit_runs, "broken": self.audit_breaks},
            "artifactBlobs": {"checked": self.blobs_checked, "problems": self.blob_problems},
        }


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
                    report.audit_breaks.append(
                        f"run {run_id}: event {chain.broken_at}: {chain.problem}"
                    )
        report.audit_runs = len(run_ids)
        verified = ArtifactStore.beside(store, clock).verify(None)
        report.blobs_checked = verified.checked
        report.blob_problems = [problem.message for problem in verified.problems]
    if report.damaged:
        health.mark_damaged(store.path, report.findings())
    else:
        health.clear_damage(store.path)
    return report
