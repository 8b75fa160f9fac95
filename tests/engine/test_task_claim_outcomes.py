"""What a claim row carries back to the run's driver (engine/run/task_claims.py): the outcome
survives the round trip through JSON, and artifact bytes the driver cannot read fail the
task instead of being recorded."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from agentctl.artifacts.models import IngestedBlob
from agentctl.engine.run.artifacts import IngestedFile, RunArtifacts
from agentctl.engine.run.outcome import TaskOutcome
from agentctl.engine.run.task_claims import TaskClaims, outcome_from_json, outcome_to_json
from agentctl.ids import SystemClock
from agentctl.signals import EffectBlocked
from agentctl.store.engine import open_store


def _outcome(digest: str) -> TaskOutcome:
    return TaskOutcome(
        "succeeded",
        2,
        output={"exitCode": 0},
        has_output=True,
        memory_delta={"k": [1, 2]},
        input_digest="sha256:in",
        effect_ids=["eff-1"],
        artifacts=[IngestedFile("out/a.txt", "out/a.txt", IngestedBlob(digest, 3, "lease-1"))],
        condition={"kind": "when", "result": True},
        blocked=EffectBlocked("eff-2", "builtin.shell.exec"),
    )


def test_an_outcome_survives_the_claim_row() -> None:
    original = _outcome("sha256:" + "ab" * 32)
    back = outcome_from_json(json.loads(json.dumps(outcome_to_json(original))))
    assert outcome_to_json(back) == outcome_to_json(original)
    assert back.blocked is not None and back.blocked.effect_id == "eff-2"
    assert back.artifacts[0].blob == original.artifacts[0].blob


def test_artifact_bytes_the_driver_cannot_read_fail_the_task(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "r.db"))
    artifacts = RunArtifacts(store, SystemClock(), "run-1")
    layout = artifacts.artifact_store().layout
    present = b"abc"
    import hashlib

    digest = "sha256:" + hashlib.sha256(present).hexdigest()
    path = layout.blob_path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(present)
    driver = SimpleNamespace(artifacts=artifacts)
    kept = TaskClaims._checked(driver, _outcome(digest))  # type: ignore[arg-type]
    assert kept.status == "succeeded"
    absent = "sha256:" + "cd" * 32
    failed = TaskClaims._checked(driver, _outcome(absent))  # type: ignore[arg-type]
    assert failed.status == "failed" and failed.error is not None
    assert failed.error["code"] == "artifact.not_shared"
    assert absent in failed.error["message"] and "AGENTCTL_ARTIFACT_ROOT" in failed.error["message"]
    store.close()
