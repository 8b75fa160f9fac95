"""The record families converted to typed records keep the JSON they had before.

tests/fixtures/records/before_record_families.json was written by the hand-written
``to_json`` methods these records replaced, from the very samples :func:`samples` builds
(constructors keep their positional and keyword forms, so the same code builds them before
and after). Every sample must render the same document, keys in the same order; the records
that are stored and read back (the plan's requirements, the pack lock, long-term memory
entries, recorded retrievals, a task's error) must read the old document back and write it
out byte for byte.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentctl.artifacts.listing import BlobListing
from agentctl.compiler.requirements import (
    EffectRequirement,
    ProviderRequirement,
    Requirements,
    ToolRequirement,
)
from agentctl.diagnostics import Diagnostic
from agentctl.digest import canonical_json
from agentctl.engine.core.records import RunRow, TaskRow
from agentctl.engine.dbcheck import AuditChainsChecked, BlobsChecked, DatabaseCheck
from agentctl.engine.recovery.compensation import CompensationPlan, CompensationStep
from agentctl.engine.recovery.planner import RecoveryPlan, TaskDecision
from agentctl.engine.run.outcome import RunOutcome
from agentctl.errors import PersistenceError
from agentctl.memory.entries import MemoryEntry, MemoryRecord
from agentctl.memory.housekeeping import GcReport
from agentctl.memory.longterm import MemoryWrite, WriteResult
from agentctl.memory.query import SearchHit, SearchQuery, SearchResult
from agentctl.observability.audit import AuditEvent
from agentctl.results import RunResult
from agentctl.scheduling.registry import WorkflowEntry
from agentctl.signals import TaskFailure
from agentctl.spec.pack_lock import (
    LOCK_API_VERSION,
    LOCK_FILE,
    LockedPack,
    LockProblem,
    PackSource,
    read_lock,
    write_lock,
)
from agentctl.spec.packs import ResolvedPack
from agentctl.spec.variables import ResolvedVariable, VarEntry, VarSource
from agentctl.store.states import RunState
from agentctl.store.stats import DatabaseStats

FIXTURE = Path(__file__).parents[1] / "fixtures" / "records" / "before_record_families.json"
T1 = datetime(2026, 11, 30, 16, 5, 7, 123456, tzinfo=UTC)
T2 = datetime(2026, 11, 30, 17, 0, 0, tzinfo=timezone(timedelta(hours=1)))


def _run_row() -> RunRow:
    return RunRow(
        id="run-1", workflow_name="review", workflow_digest="sha256:w1", plan_digest="sha256:p",
        plan={}, workflow={}, workflow_file="review.yaml", inputs={}, mode="execute",
        status="failed", workspace=None, source_run_id=None, relation=None, output=None,
        error=None, created_at=T1, updated_at=T1, deadline_at=None, cancel_requested=False,
        cancel_reason=None, owner_id=None, owner_lease_expires_at=None,
    )  # fmt: skip


def _requirements() -> Requirements:
    return Requirements(
        providers=(
            ProviderRequirement(
                name="main", kind="openai", agents=("a", "b"),
                capabilities=("text", "tools"), required=("tools",),
            ),
            ProviderRequirement(name="p2", kind="fake", agents=(), capabilities=(), required=()),
        ),
        tools=(
            ToolRequirement(
                name="read", kind="mcp", capability="tools", effect_class="read_only",
                risk="low", idempotency="idempotent", approval="never",
            ),
        ),
        effects=(
            EffectRequirement(
                task="t1", operation="builtin.shell.exec", effect_class="external_mutate",
                risk="high", idempotency="unknown", policy_label="shell", capability="process",
                approval_possible=True,
            ),
            EffectRequirement(
                task="t2", operation="model.call", effect_class="model", risk="low",
                idempotency="unknown", policy_label="model", capability="text",
                approval_possible=False,
            ),
        ),
    )  # fmt: skip


def _locked() -> LockedPack:
    return LockedPack(
        name="tools", version="1.2.0", source=PackSource("packs/tools"),
        manifest="agentctl.pack.yaml", integrity="sha256:m", content="sha256:c",
        signed=False, trust="local",
        items={"actions": ["tools.fmt", "tools.lint"], "agents": ["tools.bot"]},
    )  # fmt: skip


def _entry_json() -> MemoryEntry:
    return MemoryEntry.json_value({"b": [1, 2], "a": "x"}, text="about x", metadata={"k": 1})


def _query() -> SearchQuery:
    return SearchQuery.build("notes", "what is x", mode="hybrid", limit=3, filters={"k": 1})


def samples() -> dict[str, list[Any]]:
    """The records, as built by their callers (one list per kind)."""
    check = DatabaseCheck(path="/d/db.sqlite")
    check.integrity = ["ok"]
    broken = DatabaseCheck(
        path="/d/x.sqlite", integrity=["row 3 missing"], foreign_keys=["tasks 1"],
        audit_chains=AuditChainsChecked(2, ["run r: event 2: digest"]),
        artifact_blobs=BlobsChecked(4, ["gone"]),
    )  # fmt: skip
    steps = [
        CompensationStep("t1", "compensate", "confirmed mutation", ["eff-1"], {"id": 3}),
        CompensationStep(task_id="t2", action="skip", reason="read only"),
        CompensationStep("t3", "blocked", "uncertain effect eff-9", ["eff-9"]),
    ]
    prepared = SimpleNamespace(
        plan=SimpleNamespace(workflow_name="review", workflow_digest="sha256:w2")
    )
    decisions = [
        TaskDecision("a", "reuse", "compatible"),
        TaskDecision("b", "execute", "changed"),
        TaskDecision("c", "blocked", "uncertain", hint="reconcile it"),
    ]
    write = MemoryWrite("notes", "k1", _entry_json(), T1)
    return {
        "Diagnostic": [
            Diagnostic("schema_violation", "bad field"),
            Diagnostic(
                code="unknown_task",
                message="no task `x`",
                severity="warning",
                file="w.yaml",
                line=3,
                column=5,
                path="spec.tasks[2].needs",
                help="fix it",
                extra={"task": "x"},
            ),
            Diagnostic(code="c", message="m", severity="info", file="f", column=2),
        ],  # fmt: skip
        "Requirements": [_requirements(), Requirements()],
        "WorkflowEntry": [
            WorkflowEntry(
                "review",
                ("review.workflow", "review"),
                Path("w/review.yaml"),
                "Reviews a change.",
                "sha256:d",
                None,
            ),
            WorkflowEntry("broken", ("broken",), Path("w/broken.yaml"), None, None, "bad"),
        ],  # fmt: skip
        "LockedPack": [_locked()],
        "ResolvedPack": [
            ResolvedPack(
                name="tools",
                version="1.2.0",
                path="packs/tools",
                manifest="agentctl.pack.yaml",
                integrity="sha256:m",
                content="sha256:c",
                signed=True,
                trust="signed",
                policy_defaults={"approval": "never"},
                items={"actions": {"tools.lint": {}, "tools.fmt": {}}, "tools": {}},
            )
        ],  # fmt: skip
        "ResolvedVariable": [
            ResolvedVariable(
                "replicas",
                VarEntry(5, VarSource("--var", flag="--var replicas=5")),
                (
                    VarEntry(
                        2,
                        VarSource(
                            "spec.vars", file="w.yaml", line=4, column=3, path="spec.vars.replicas"
                        ),
                    ),
                    VarEntry(
                        3,
                        VarSource("--vars-file", file="v.yaml", line=1, column=1, path="replicas"),
                    ),
                ),
            ),
            ResolvedVariable("x", VarEntry({"a": 1}, VarSource("spec.vars")), ()),
        ],  # fmt: skip
        "AuditEvent": [
            AuditEvent("run-1", 1, "run.created", None, None, {"a": 1}, None, "sha256:e1", T1),
            AuditEvent(
                run_id="run-1",
                seq=2,
                kind="task.succeeded",
                task_id="t",
                effect_id="eff-1",
                payload=[1, "x"],
                prev_digest="sha256:e1",
                digest="sha256:e2",
                created_at=T2,
                format_version=1,
                trace_id="0af7651916cd43dd8448eb211c80319c",
                span_id="b7ad6b7169203331",
            ),
        ],  # fmt: skip
        "DatabaseCheck": [check, broken],
        "TaskRow": [
            TaskRow("t1", 0, "succeeded", 1, "executed", {"x": 1}, True, None),
            TaskRow("t2", 1, "pending", 0, None, None, False, None),
            TaskRow("t3", 2, "succeeded", 1, "executed", None, True, None),
            TaskRow("t4", 3, "failed", 2, "executed", "ignored", False, {"code": "task.failed"}),
        ],
        "RunOutcome": [
            RunOutcome("run-1", "succeeded", {"out": 1}),
            RunOutcome("run-2", "failed", None, {"code": "task.failed", "message": "x"}),
            RunOutcome(
                "run-3",
                "paused",
                None,
                {"code": "run.paused"},
                approvals=["appr-1", "pause:wait"],
                uncertain_effects=[{"effectId": "eff-1"}],
            ),
            RunOutcome("run-4", "paused", approvals=["pause:wait"]),
        ],  # fmt: skip
        "RunResult": [
            RunResult("run-1", RunState.SUCCEEDED, {"out": 1}),
            RunResult(
                run_id="run-2",
                state=RunState.PAUSED,
                output=None,
                error={"code": "x"},
                pending_approvals=["appr-1"],
                paused_tasks=["wait"],
                uncertain_effects=[{"effectId": "eff-1"}],
                changed_files=[{"path": "a", "change": "modified"}],
            ),
            RunResult("run-3", RunState.FAILED, changed_files=[]),
        ],  # fmt: skip
        "TaskFailure": [
            TaskFailure("boom"),
            TaskFailure(
                "again",
                code="tool.timeout",
                retryable=True,
                stops_run=True,
                details={"hint": "x"},
                permanent=True,
            ),
            TaskFailure("d", details=0),
        ],  # fmt: skip
        "CompensationStep": steps,
        "CompensationPlan": [
            CompensationPlan(_run_row(), steps),
            CompensationPlan(_run_row(), steps[:2]),
        ],
        "RecoveryPlan": [RecoveryPlan("repair", _run_row(), prepared, decisions)],  # type: ignore[arg-type]
        "DatabaseStats": [
            DatabaseStats("/d/db", "0010", "0010", {"runs": 3, "tasks": 9}, 4096, 0, "wal", "FULL"),
            DatabaseStats("/d/db", None, "0010", {}, 0, 0, "memory", "OFF"),
        ],
        "BlobListing": [
            BlobListing("sha256:ab", 42, "text/plain", T1, 12.3456789, 1, 0, True, True, False),
            BlobListing("sha256:cd", 0, None, T2, 0.0, 0, 2, False, False, True),
        ],
        "GcReport": [
            GcReport(False, T1, T2, 3, 2, ("run-1", "run-2")),
            GcReport(dry_run=True, cutoff=T2, now=T2, memory_entries=0, runs=0, run_ids=()),
        ],
        "MemoryEntry": [
            MemoryEntry.text("hello", {"source": "test"}),
            _entry_json(),
            MemoryEntry.json_value([1, 2]),
        ],
        "MemoryRecord": [
            MemoryRecord("notes", "k1", _entry_json(), "fake-embed", T1, T2, None, {"run": "r"}),
            MemoryRecord("notes", "k2", MemoryEntry.text("t"), None, T1, T1, T2, None),
        ],
        "MemoryWrite": [write, MemoryWrite("notes", "k2", MemoryEntry.text("t"), None)],
        "WriteResult": [WriteResult(write, "fake", 8, True)],
        "SearchResult": [
            SearchResult(
                _query(),
                (SearchHit("notes", "k1", 0.75, {"content": {"type": "text"}}, "2026", None),),
                "fake-embed",
            ),
            SearchResult(SearchQuery.build("notes", "x"), ()),
        ],
    }


def _render(record: Any) -> Any:
    if isinstance(record, MemoryWrite):
        return record.effect_input()
    return record.to_json()


def _before() -> dict[str, list[Any]]:
    data: dict[str, list[Any]] = json.loads(FIXTURE.read_text())
    return data


def capture() -> None:
    """Write the fixture from the current code (run once, before a conversion)."""
    out = {kind: [_render(r) for r in records] for kind, records in samples().items()}
    FIXTURE.write_text(json.dumps(out, indent=1) + "\n")


SAMPLES = samples()
BEFORE = _before() if FIXTURE.exists() else {}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_record_renders_the_document_it_rendered_before(kind: str) -> None:
    rendered = [_render(record) for record in SAMPLES[kind]]
    for now, before in zip(rendered, BEFORE[kind], strict=True):
        assert json.dumps(now) == json.dumps(before)  # same keys, same order, same values


READ_BACK: dict[str, Any] = {
    "Requirements": Requirements.from_json,
    "LockedPack": LockedPack.from_json,
    "MemoryEntry": MemoryEntry.from_json,
    "SearchResult": SearchResult.from_json,
}


@pytest.mark.parametrize(
    ("kind", "index"),
    [(kind, i) for kind in sorted(READ_BACK) for i in range(len(SAMPLES[kind]))],
)
def test_a_stored_record_reads_back_to_the_same_bytes(kind: str, index: int) -> None:
    stored = BEFORE[kind][index]
    written = READ_BACK[kind](stored).to_json()
    assert json.dumps(written) == json.dumps(stored)
    assert canonical_json(written) == canonical_json(stored)  # the same digest


def test_requirements_stored_before_every_key_was_written_read_with_defaults() -> None:
    older = {"providers": [{"name": "main", "kind": "openai"}]}
    read = Requirements.from_json(older)
    assert read.providers == (ProviderRequirement("main", "openai", (), (), ()),)
    assert (read.tools, read.effects) == ((), ())
    assert Requirements.from_json({}) == Requirements()


def test_malformed_requirements_are_a_corrupt_record_naming_the_key() -> None:
    with pytest.raises(PersistenceError) as caught:
        Requirements.from_json({"tools": [{"name": "read", "kind": "mcp"}]})
    assert caught.value.code == "store.corrupt"
    assert str(caught.value).startswith("invalid plan requirements: `tools.0.capability`")


def test_a_diagnostic_built_by_position_keeps_its_severity_keyword_only() -> None:
    finding = Diagnostic("yaml_syntax", "bad", file="w.yaml", line=2)
    assert (finding.severity, finding.file, finding.location()) == ("error", "w.yaml", "w.yaml:2")
    assert finding == Diagnostic("yaml_syntax", "bad", file="w.yaml", line=2, extra={"x": 1})


def test_a_pack_lock_written_before_every_key_reads_with_defaults(tmp_path: Path) -> None:
    older = {"name": "tools", "version": "1", "integrity": "sha256:m", "content": "sha256:c"}
    (tmp_path / LOCK_FILE).write_text(
        json.dumps({"apiVersion": LOCK_API_VERSION, "packs": [older]})
    )
    entry = read_lock(tmp_path)["tools"]  # type: ignore[index]
    assert (entry.path, entry.manifest, entry.signed, entry.trust, entry.items) == (
        "",
        "",
        False,
        "",
        {},
    )
    write_lock(tmp_path, [_locked()])
    assert read_lock(tmp_path) == {"tools": _locked()}


def test_a_malformed_pack_lock_names_the_file_and_the_key(tmp_path: Path) -> None:
    broken = {"name": "tools", "version": "1", "integrity": "sha256:m", "content": "sha256:c"}
    broken["signed"] = "maybe"
    (tmp_path / LOCK_FILE).write_text(
        json.dumps({"apiVersion": LOCK_API_VERSION, "packs": [broken]})
    )
    with pytest.raises(LockProblem) as caught:
        read_lock(tmp_path)
    assert str(caught.value).startswith(
        f"{tmp_path / LOCK_FILE} is not a valid pack lock: invalid pack lock entry: `"
    )
    assert str(caught.value).endswith(
        "`signed`: input should be a valid boolean, unable to interpret input"
    )
