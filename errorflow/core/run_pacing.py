"""The garbage collector paced for a run: what exists before it out of its way, and a
young collection every 20,000 allocations instead of every 700.

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
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000


class _Pacer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved = gc.get_threshold()
        self.froze = False

    def enter(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.saved = gc.get_threshold()
                self.froze = gc.get_freeze_count() == 0  # never someone else's freeze
                if self.froze:
                    gc.freeze()
                young, *older = self.saved
                gc.set_threshold(max(young, YOUNG_THRESHOLD), *older)
            self.depth += 1

    def leave(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                gc.set_threshold(*self.saved)
                if self.froze:
                    gc.unfreeze()


_PACER = _Pacer()


@contextmanager
def paced_collector() -> Iterator[None]:
    """The collector paced for a run while inside (see the module's docstring)."""
    _PACER.enter()
    try:
        yield
    finally:
        _PACER.leave()
