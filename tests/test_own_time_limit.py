"""A python agent's own time (errorflow/agents/own/own_time_limit.py): code that runs past
the limit is stopped with `OwnCodeTimeout` (a TimeoutError, classified `timeout`); the
time inside gate calls does not count, calls at once count once; the callable's own
TimeoutError is its own; a gate call left running after the callable returned breaks
nothing; Ctrl-C (a cancel from outside) stays a cancel."""

from __future__ import annotations

import asyncio

import pytest

from errorflow.agents.own.own_time_limit import OwnCodeTimeout, OwnTimeLimit
from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.classify import classify_exception


async def test_code_past_its_time_is_stopped_as_a_timeout() -> None:
    limit = OwnTimeLimit(0.05)
    with pytest.raises(OwnCodeTimeout) as info:
        async with limit.running():
            await asyncio.Event().wait()
    said = str(info.value)
    assert said.startswith("the agent's function did not return within 0.05s of its own time")
    assert classify_exception("clerk", info.value).code is ErrorCode.TIMEOUT


async def test_time_in_gate_calls_does_not_count() -> None:
    limit = OwnTimeLimit(0.3)

    async def gate_call() -> None:
        with limit.paused():
            await asyncio.sleep(0.15)

    async with limit.running():
        for _ in range(4):  # 0.6 s in the gates, well past 0.3 s
            await gate_call()
        await asyncio.gather(gate_call(), gate_call(), gate_call())  # at once: once
        await asyncio.sleep(0.05)  # own time stays below the limit


async def test_own_time_adds_up_between_gate_calls() -> None:
    limit = OwnTimeLimit(0.2)
    with pytest.raises(OwnCodeTimeout):
        async with limit.running():
            for _ in range(6):  # 6 x 0.06 s of its own, a gate call between each
                await asyncio.sleep(0.06)
                with limit.paused():
                    await asyncio.sleep(0.01)


async def test_the_callables_own_timeout_error_is_its_own() -> None:
    limit = OwnTimeLimit(5.0)
    with pytest.raises(TimeoutError, match="its own client") as info:
        async with limit.running():
            raise TimeoutError("its own client timed out")
    assert not isinstance(info.value, OwnCodeTimeout)


async def test_a_gate_call_left_running_after_the_callable_returned() -> None:
    limit = OwnTimeLimit(0.1)
    release = asyncio.Event()

    async def gate_call() -> None:
        with limit.paused():
            await release.wait()

    async with limit.running():
        left = asyncio.create_task(gate_call())
        await asyncio.sleep(0)  # it is inside the gate now
    release.set()
    await left  # ends with nothing to reschedule: no error
    async with limit.running():  # and the limit runs again from its full time
        await asyncio.sleep(0.05)


async def test_a_cancel_from_outside_stays_a_cancel() -> None:
    limit = OwnTimeLimit(5.0)

    async def agent() -> None:
        async with limit.running():
            await asyncio.Event().wait()

    task = asyncio.create_task(agent())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
