"""Processes as /proc shows them (Linux): a process's descendants, and whether they are
still alive, told apart from a later process that got the same pid by its start time."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

#: (pid, start time in clock ticks since boot): one process, even after its pid is reused.
Proc = tuple[int, int]


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 on), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _proc(pid: int) -> Proc | None:
    fields = _stat(pid)
    return None if fields is None else (pid, int(fields[19]))


def descendants(pid: int) -> list[Proc]:
    """Every living process below `pid`, children first."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], list(parents.get(pid, []))
    while todo:
        child = todo.pop(0)
        if (proc := _proc(child)) is not None:
            found.append(proc)
        todo += parents.get(child, [])
    return found


def alive(proc: Proc) -> bool:
    """The process runs (a zombie waiting for its parent to reap it does not)."""
    fields = _stat(proc[0])
    return fields is not None and int(fields[19]) == proc[1] and fields[0] not in "ZX"


def command(proc: Proc) -> str:
    try:
        return Path(f"/proc/{proc[0]}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


def still_alive(procs: list[Proc], limit_s: float) -> list[Proc]:
    """The processes of `procs` still alive after waiting up to `limit_s` for them all."""
    deadline = time.monotonic() + limit_s
    while any(alive(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in procs if alive(p)]


def kill_all(procs: list[Proc]) -> None:
    """What a test leaves behind on failure: killed, not left to the next test."""
    for proc in procs:
        if alive(proc):
            os.kill(proc[0], signal.SIGKILL)
