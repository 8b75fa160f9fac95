"""Typed records keep the JSON that was stored and shown before they existed.

tests/fixtures/records/before_typed_records.json was written by the hand-written
``to_json`` methods these records replaced (the same values as below). Stored records
(model requests and responses are effect inputs and results: their digests are part of
effect ids; artifact manifests; recorded memory retrievals) must read back and write out
the very same bytes, keys in the same order; the records the CLI shows must render the
same documents.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from agentctl.artifacts.models import (
    ArtifactProblem,
    ArtifactRef,
    BlobInfo,
    ExportResult,
    GcReport,
    IngestedBlob,
    LeaseInfo,
    VerifyReport,
)
from agentctl.digest import canonical_json
from agentctl.engine.actions.agent import _agent_model
from agentctl.engine.core.isolation import _container_spec
from agentctl.engine.effects.journal import EffectRecord, Reconciliation
from agentctl.errors import ProviderError, UsageError
from agentctl.memory.query import SearchResult
from agentctl.providers.base import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec, Usage
from agentctl.signals import TaskFailure
from agentctl.spec.variables import VarSource

BEFORE = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "records" / "before_typed_records.json").read_text()
)
STORED: dict[str, Any] = {
    "ModelRequest": ModelRequest,
    "ModelResponse": ModelResponse,
    "Message": Message,
    "SearchResult": SearchResult,
    "ArtifactRef": ArtifactRef,
    "Usage": Usage,
    "VarSource": VarSource,
}
T1 = datetime(2026, 11, 30, 16, 5, 7, 123456, tzinfo=UTC)
T2 = datetime(2026, 11, 30, 17, 0, 0, tzinfo=timezone(timedelta(hours=1)))


@pytest.mark.parametrize(
    ("kind", "index"),
    [(kind, i) for kind, items in BEFORE["stored"].items() for i in range(len(items))],
)
def test_a_stored_record_reads_back_to_the_same_bytes(kind: str, index: int) -> None:
    stored = BEFORE["stored"][kind][index]
    record = STORED[kind].from_json(stored)
    written = record.to_json()
    assert json.dumps(written) == json.dumps(stored)  # same keys, same order, same values
    assert canonical_json(written) == canonical_json(stored)  # same digest


def _ref() -> ArtifactRef:
    return ArtifactRef(
        7, "sha256:ab", "run-1", "report", "report", 2, "out/r.md", 42, "sha256:def", None,
        "sha256:out", T1,
    )  # fmt: skip


def test_the_records_the_cli_shows_render_as_before() -> None:
    lease = LeaseInfo("lease-1", "sha256:ab", "run-1", T1, T2)
    shown = {
        "EffectRecord": EffectRecord(
            id="eff-1",
            run_id="run-1",
            task_id="t",
            attempt=1,
            ordinal=2,
            operation="builtin.shell.exec",
            input_digest="sha256:i",
            effect_class="external_mutate",
            idempotency="unknown",
            risk="high",
            idempotency_key=None,
            status="succeeded",
            request={"command": "echo"},
            result={"exitCode": 0},
            error=None,
            confirmed=True,
            requested_at=T1,
            started_at=T2,
            finished_at=None,
        ),
        "Reconciliation": Reconciliation(
            id=3,
            effect_id="eff-1",
            status="applied",
            reason="checked",
            actor="ops",
            evidence="ticket 1",
            result={"ok": True},
            result_validated=True,
            compensation_effect_id=None,
            created_at=T1,
        ),
        "LeaseInfo": LeaseInfo("lease-1", None, "run-1", T1, T2),
        "BlobInfo": BlobInfo(
            "sha256:ab", 42, "text/markdown", T1, None, True, True, "/a/b", [_ref()], [lease]
        ),
        "ArtifactProblem": ArtifactProblem(
            "sha256:ab", "corrupt", "hash differs", "/a/b", run_id="run-1", version=2
        ),
        "VerifyReport": VerifyReport(3, 2, [ArtifactProblem("sha256:cd", "missing", "gone", "/c")]),
        "ExportResult": ExportResult("sha256:ab", "/tmp/x", 42),
        "IngestedBlob": IngestedBlob("sha256:ab", 42, "lease-1"),
        "GcReport": GcReport(True, 30, ["sha256:ab"], 42, [], 1, 2, 3, 4, ["sha256:cd"], []),
        "GcReportFloat": GcReport(False, 0.5),
    }
    assert set(shown) == set(BEFORE["shown"])
    for kind, record in shown.items():
        assert json.dumps(record.to_json()) == json.dumps(BEFORE["shown"][kind]), kind


def test_records_are_built_by_position_by_attribute_or_from_camel_case() -> None:
    by_position = ToolSpec("read", "Read a file.", {"type": "object"})
    by_name = ToolSpec(name="read", description="Read a file.", input_schema={"type": "object"})
    read_back = ToolSpec.from_json(
        {"name": "read", "description": "Read a file.", "inputSchema": {"type": "object"}}
    )
    assert by_position == by_name == read_back
    assert LeaseInfo.from_json(LeaseInfo("l", None, "h", T1, T2).to_json()).id == "l"


def test_keys_added_after_the_first_format_appear_only_when_set() -> None:
    plain = Message("assistant", "hi")
    assert "responseId" not in plain.to_json() and "providerItems" not in plain.to_json()
    continued = Message("assistant", "hi", response_id="r1")
    assert continued.to_json()["responseId"] == "r1"
    # A response always carries responseId (it was in the first format), even when null.
    assert ModelResponse(None, (), "complete", Usage()).to_json()["responseId"] is None


@pytest.mark.parametrize(
    ("record", "data", "message"),
    [
        (Usage, {"inputTokens": True}, "usage: `inputTokens`: input should be a valid integer"),
        (ToolCall, {"id": "x", "name": "y"}, "tool call: `input`: field required"),
        (
            Message,
            {"role": "bot"},
            "message: `role`: input should be 'user', 'assistant' or 'tool'",
        ),
        (ModelRequest, [], "model request: `record`: input should be a dictionary or an instance"),
    ],
)
def test_a_record_that_does_not_fit_names_the_stored_key(
    record: Any, data: Any, message: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        record.from_json(data)
    assert caught.value.code == "provider.invalid_response"
    assert str(caught.value).startswith(f"invalid {message}")


def test_an_agent_or_container_of_a_run_that_does_not_fit_fails_its_task() -> None:
    with pytest.raises(TaskFailure) as caught:
        _agent_model("reviewer", {"provider": "scripted", "model": "m", "maxTurns": "many"})
    assert caught.value.code == "input.invalid" and "agent `reviewer`" in caught.value.message
    with pytest.raises(TaskFailure) as caught:
        _container_spec({"isolation": "container", "container": {"image": "alpine"}})
    assert caught.value.code == "input.invalid"


def test_the_engine_takes_agent_and_container_defaults_from_the_spec_models() -> None:
    agent = _agent_model("a", {"provider": "p", "model": "m", "instructions": "x"})
    assert (agent.max_turns, agent.max_tool_calls, agent.max_output_tokens) == (8, 16, 2048)
    image = "alpine@sha256:" + "a" * 64
    assert _container_spec({"isolation": "container", "container": {"image": image}}) == {
        "image": image,
        "runtime": "auto",
        "memoryLimitBytes": 268435456,
        "cpuLimitMillis": 1000,
        "pidsLimit": 64,
    }


def test_a_malformed_recorded_retrieval_is_a_memory_record_error() -> None:
    stored = BEFORE["stored"]["SearchResult"][0]
    broken = {**stored, "results": [{**stored["results"][0], "score": "high"}]}
    with pytest.raises(UsageError) as caught:
        SearchResult.from_json(broken)
    assert caught.value.code == "memory.invalid_record"
    assert "`score`" in str(caught.value)
