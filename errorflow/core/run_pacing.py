"""The interpreter paced for a run: the garbage collector (what exists before the run
out of its way, a young collection every 20,000 allocations instead of every 700), and
the store's thread given Python's lock within a millisecond instead of five.

CPython's cycle collector looks at young objects every 700 net allocations of containers,
and now and then at every tracked object, the start-up's included (modules, pydantic's
schemas: hundreds of thousands). A run allocates and frees millions of small objects, all
freed by reference counting as their trial ends (a trial leaves no cycle behind:
tests/test_runner.py), so those collections find nothing, and cost about an eighth of a
run's CPU (bench/RESULTS.md, "fifth session"). During a run, `gc.freeze()` moves what
exists into the permanent generation, which no collection walks, and the first threshold
is raised; collections still run, so a cycle a run does make is still freed. Both are
undone when the last run of the process ends (runs nest: concurrent runs, a sweep's
arms). A process that froze objects itself keeps them frozen: then only the threshold
changes.

The store writes on its own thread (aiosqlite) beside the run's, which holds the lock
while it works; each time SQLite gives the lock up around a statement, the store's thread
waits for the run's thread to be made to let go, every `sys.getswitchinterval()` (5 ms by
default), and a batch took many times as long beside the run as alone, while the
recorder waited for it (bench/RESULTS.md, "ninth session"). A shorter interval costs the
run's thread nothing while no other thread asks for the lock. A process that set a shorter
one keeps it; the interval is the process's, and the one from before the first run is put
back when the last one ends.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000
SWITCH_INTERVAL_S = 0.001


class _Pacer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved = gc.get_threshold()
        self.froze = False
        self.switch_s = sys.getswitchinterval()

    def enter(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.saved = gc.get_threshold()
                self.froze = gc.get_freeze_count() == 0  # never someone else's freeze
                if self.froze:
                    gc.freeze()
                young, *older = self.saved
                gc.set_threshold(max(young, YOUNG_THRESHOLD), *older)
                self.switch_s = sys.getswitchinterval()
                if self.switch_s > SWITCH_INTERVAL_S:
                    sys.setswitchinterval(SWITCH_INTERVAL_S)
            self.depth += 1

    def leave(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                gc.set_threshold(*self.saved)
                if self.switch_s > SWITCH_INTERVAL_S:
                    sys.setswitchinterval(self.switch_s)
                if self.froze:
                    gc.unfreeze()


_PACER = _Pacer()


@contextmanager
def paced_for_run() -> Iterator[None]:
    """The interpreter paced for a run while inside (see the module's docstring)."""
    _PACER.enter()
    try:
        yield
    finally:
        _PACER.leave()
