"""SIGTERM handled as Ctrl-C is: what a supervisor sends (`kill`, `docker stop`, systemd)
stops a run cleanly, so it is stored as interrupted and the command says how to resume
it, instead of dying with the run left `running` in the store."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt (exit code 130, the same
    message): every handler of Ctrl-C handles it."""


async def interruptible(work: Coroutine[Any, Any, T]) -> T:
    """Await `work`; a SIGTERM meanwhile cancels it as Ctrl-C does (its cleanup runs)
    and raises `Terminated`."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
        return await work
    try:
        return await work
    except asyncio.CancelledError:
        if terminated:
            raise Terminated from None
        raise
    finally:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGTERM)
