"""Fault-injection points for the crash suite (test-only, inert unless set).

``AGENTCTL_FAULT=<point>[:<n>]`` makes the process SIGKILL itself the n-th time (default
1st) it passes ``point``. The points sit at every boundary of the effect protocol and the
task commit, so tests/crash can prove the recovery rules at each one:

- ``effect.requested``  after the effect's journal committed: ``requested`` for an effect
                        that needs approval (before it is asked for); ``started`` for
                        the rest, journaled so in that one commit, where a kill leaves
                        what one at ``effect.started`` leaves
- ``effect.started``    after ``started`` committed, before dispatch
- ``effect.dispatched`` after the dispatch returned, before its outcome committed
- ``effect.finished``   after the outcome committed, before the task transition
- ``effect.remote_noted`` after a remote peer's handle for an in-flight effect (an A2A
                        task id) committed, while the remote work goes on; only A2A
                        delegations pass it, so it is not in :data:`FAULT_POINTS` (the
                        crash suite's every-workflow sweep) and its test lives with the
                        protocol tests
- ``task.committed``    after a task transition committed (the last batch's commits the
                        run's end too: a kill there leaves the run finished)
- ``run.created``       after the run row committed, before the first task
- ``batch.committing``  a batch's outcomes in hand, before the transaction that commits
                        them (with a batch spread over workers, the claims are still
                        there, done: the next owner keeps their outcomes); the effect
                        points above cover what it leaves in one process, so it is not in
                        :data:`FAULT_POINTS` and its test is in tests/pg

The daemon passes :meth:`Faults.hit` down to the scheduler for its own two points:
``schedule.slot_recorded`` (a firing committed, its run not created) and
``schedule.run_created`` (the run created and linked, not started).
"""

from __future__ import annotations

import os
import signal

__all__ = ["FAULT_POINTS", "Faults"]

FAULT_POINTS = (
    "run.created",
    "effect.requested",
    "effect.started",
    "effect.dispatched",
    "effect.finished",
    "task.committed",
)


class Faults:
    def __init__(self, spec: str | None = None) -> None:
        spec = spec if spec is not None else os.environ.get("AGENTCTL_FAULT", "")
        self._point: str | None = None
        self._remaining = 0
        if spec:
            point, _, count = spec.partition(":")
            self._point = point
            self._remaining = int(count) if count.isdigit() else 1

    def hit(self, point: str) -> None:
        if self._point != point:
            return
        self._remaining -= 1
        if self._remaining <= 0:
            os.kill(os.getpid(), signal.SIGKILL)
