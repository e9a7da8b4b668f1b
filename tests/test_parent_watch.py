"""A child process ends when its parent dies, even by SIGKILL, after its cleanup and one
line on stderr; while the parent lives it stays."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from errorflow.runtime.parent_watch import leave_with_parent
from tests import processes

PARENT = textwrap.dedent(
    """
    import multiprocessing, sys, time
    from pathlib import Path
    from errorflow.runtime.parent_watch import leave_with_parent

    def child(mark: str) -> None:
        leave_with_parent("test child", lambda: Path(mark).write_text("tidied"))
        time.sleep(600)  # as a worker blocked on its job queue

    if __name__ == "__main__":
        proc = multiprocessing.get_context("spawn").Process(target=child, args=(sys.argv[1],))
        proc.start()
        print(proc.pid, flush=True)
        time.sleep(600)
    """
)


def test_a_process_multiprocessing_did_not_start_watches_nothing() -> None:
    assert leave_with_parent("the test process") is None


def test_a_child_leaves_when_its_parent_is_killed_and_not_before(tmp_path: Path) -> None:
    script, mark = tmp_path / "parent.py", tmp_path / "tidied"
    script.write_text(PARENT)
    parent = subprocess.Popen(
        [sys.executable, str(script), str(mark)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started: list[processes.Proc] = []
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        started = [p for p in processes.descendants(parent.pid) if p[0] == pid]
        time.sleep(1.0)
        assert processes.alive(started[0]) and not mark.exists()  # its parent lives
        parent.send_signal(signal.SIGKILL)
        assert processes.still_alive(started, limit_s=10) == []
        _, stderr = parent.communicate(timeout=10)  # the child held its stderr
    finally:
        processes.kill_all(started)
        if parent.poll() is None:
            parent.kill()
    assert mark.read_text() == "tidied"
    assert f"test child: the runner (pid {parent.pid}) is gone; leaving" in stderr
