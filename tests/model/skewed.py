"""Run the agentctl CLI with its wall clock shifted: ``python skewed.py SECONDS ARGS…``.

The model test uses it to stand for a process that starts after an owner's lease ran out
(the lease is 60 s) while that owner is still alive and working, without waiting a minute.
Only ``SystemClock.now`` moves; everything else is the unchanged CLI.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta


def skew_clock(seconds: float) -> None:
    from agentctl import ids

    original = ids.SystemClock.now

    def now(self: ids.SystemClock) -> datetime:
        return original(self) + timedelta(seconds=seconds)

    ids.SystemClock.now = now  # type: ignore[method-assign]


if __name__ == "__main__":
    skew_clock(float(sys.argv[1]))
    from agentctl.cli import main as cli_main

    sys.exit(cli_main.main(sys.argv[2:]))
