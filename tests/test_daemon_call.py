"""A synchronous call in a daemon thread of its own (errorflow/core/daemon_call.py): its
result or exception reaches the caller with the caller's context, and a call the caller
gave up on is left behind in a thread nothing joins."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from errorflow.core.daemon_call import in_daemon_thread

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def add(a: int, b: int) -> int:
    return a + b


def who() -> str:
    return WHO.get()


def first_of_nothing() -> int:
    return next(n for n in () if n)


def fails() -> None:
    raise LookupError("no such row")


async def test_the_result_the_exception_and_the_context_reach_the_caller() -> None:
    assert await in_daemon_thread(add, a=2, b=3) == 5
    with pytest.raises(LookupError, match="no such row"):
        await in_daemon_thread(fails)
    WHO.set("trial 7")
    assert await in_daemon_thread(who) == "trial 7"
    # `next()` of an empty iterator: a future cannot hold a StopIteration, and the
    # caller waited out its whole timeout for a result that never came
    with pytest.raises(RuntimeError, match="StopIteration"):
        async with asyncio.timeout(5):
            await in_daemon_thread(first_of_nothing)


async def test_a_call_given_up_on_is_left_in_a_daemon_thread() -> None:
    release = threading.Event()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await in_daemon_thread(release.wait)
    left = [t for t in threading.enumerate() if t.name == "errorflow-call-wait"]
    assert left and all(t.daemon for t in left)  # the interpreter does not wait for it
    release.set()
    for t in left:
        t.join(timeout=5)
    await asyncio.sleep(0.01)  # its late result finds nobody waiting: nothing raises
