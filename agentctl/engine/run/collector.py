"""Keep the cyclic garbage collector off the objects a process holds for its whole life.

CPython's collector runs a full (oldest-generation) collection once enough objects have
survived into that generation, and a full collection traverses *every* tracked object:
the modules, classes and functions imported at start-up (about 90,000 objects once the
engine, the store and the driver are loaded) as much as the run's own. Measured on the
500-step benchmark, one such collection took 43-57 ms of a 0.19-0.22 s run, landing in
whichever run or step happened to cross the threshold.

:func:`settle_long_lived` moves everything alive when a process starts its first run into
the collector's permanent generation (:func:`gc.freeze`), so later collections only
traverse what was created after. It runs once per process: frozen objects are still freed
when their last reference goes, but a reference cycle among them is never collected, so
freezing again and again in a long-lived process (a daemon, a worker, a test session)
could keep garbage forever; once, it keeps at most what was garbage at that moment.
"""

from __future__ import annotations

import gc

__all__ = ["settle_long_lived"]

_settled = False


def settle_long_lived() -> None:
    """Freeze what this process holds now, the first time it is called (then nothing)."""
    global _settled
    if _settled:
        return
    _settled = True
    gc.freeze()
