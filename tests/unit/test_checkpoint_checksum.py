"""A checkpoint's checksum is the digest of ``{"transition", "delta"}`` as canonical JSON.

The executor writes that object's canonical text out by hand (once per task transition);
it must equal what ``digest_json`` gives for any transition name and delta text, or
``replay_memory`` would refuse the run's own checkpoints as corrupt.
"""

from __future__ import annotations

import pytest

from agentctl.digest import canonical_json, digest_json
from agentctl.engine.core.records import checkpoint_checksum

CASES = [
    ("task:a:succeeded", "{}"),
    ("task:é/ü:failed", canonical_json({"k": "line\nbreak", "q": '"quoted"', "u": "\u2028"})),
    ("task:\\back\\slash:skipped", canonical_json({"n": [1, 2.5, None, True]})),
    ("run:resumed\t\x01", ""),
]


@pytest.mark.parametrize(("transition", "delta_json"), CASES)
def test_written_out_checksum_matches_digest_json(transition: str, delta_json: str) -> None:
    expected = digest_json({"transition": transition, "delta": delta_json})
    assert checkpoint_checksum(transition, delta_json) == expected
