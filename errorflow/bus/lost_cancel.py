"""Cancellations an `asyncio.wait_for` drops on Python 3.11, found and raised again."""

from __future__ import annotations

import asyncio


def cancels() -> int:
    """How many cancellations of the current task are pending (`Task.cancelling`)."""
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def raise_lost_cancel(before: int) -> None:
    """Raise a cancellation an `asyncio.wait_for` lost. On Python 3.11, a wait_for whose
    inner await finishes as its task is cancelled returns normally and drops the cancel
    (fixed in 3.12); aiomqtt's publish awaits through one. A task whose cancel was lost
    goes on (an endpoint's resend loop, for one), and whoever awaits its end waits
    forever. `before`: `cancels()` before the await, so a task already cancelled that is
    cleaning up (a goodbye) is left alone; only a cancel that came during it is raised."""
    if cancels() > before:
        raise asyncio.CancelledError
