"""A process the runner started ends when the runner does, however the runner ends.

`daemon = True` acts only at the runner's orderly exit: a runner killed with SIGKILL
(or the OOM killer) gives its worker processes no word, and a worker blocked on its job
queue waits for ever (the queue's pipe has writers left: the workers themselves).

How a child notices, chosen among three mechanisms:

* **The parent's sentinel (chosen).** A child started by `multiprocessing` holds the
  read end of a pipe whose write end only its parent holds
  (`multiprocessing.parent_process().sentinel`); the kernel closes that end when the
  parent dies, whatever killed it. A thread blocked on it wakes at once, no polling, on
  every platform `multiprocessing` runs on, and the child leaves its own way: one line
  on stderr, its temporary files removed, a non-zero status.
* `prctl(PR_SET_PDEATHSIG)` (Linux): not used. It fires when the *thread* that started
  the child ends, not the process, so a pool started off the main thread (a library
  caller's, a UI's worker thread) would be killed under a live runner; and it kills
  before the child can say why or clean up. What it would add, a child whose
  interpreter is wedged holding the GIL, would hang the run itself first.
* Polling `os.getppid()`: a second, slower way of seeing the same thing.

The embedded broker's process has the same kind of lifeline, its stdin
(errorflow/bus/broker_serve.py).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import wait

#: The status of a child that left because its parent died (a run that failed on
#: infrastructure; nobody is left to read it but the process table).
ORPHANED_EXIT = 1


def leave_with_parent(
    what: str,
    on_leave: Callable[[], None] | None = None,
    exit: Callable[[int], object] = os._exit,
) -> threading.Thread | None:
    """In a child started by `multiprocessing`: end this process when its parent dies,
    after `on_leave` (cleanup, errors ignored) and one line on stderr naming `what`. The
    watching thread (None in a process `multiprocessing` did not start)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return None
    sentinel, pid = parent.sentinel, parent.pid

    def watch() -> None:
        wait([sentinel])  # ready only at EOF: the parent is gone
        if on_leave is not None:
            with contextlib.suppress(Exception):  # leaving matters more than tidying up
                on_leave()
        line = f"{what}: the runner (pid {pid}) is gone; leaving\n"
        with contextlib.suppress(OSError):  # one write: workers share the runner's stderr
            os.write(sys.stderr.fileno(), line.encode())
        exit(ORPHANED_EXIT)  # at once: the main thread may be deep in a trial

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
