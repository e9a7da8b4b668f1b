"""run_probes against a server that answers one request at a time and goes on with a
reply whose client gave up (as llama.cpp's does): after a call times out the next calls
wait until the server answers again, so one slow reply costs its own probe (and those
sent with it), not the calibration; a server that never answers again, or that times
out every call, still stops it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from errorflow.calibration.probes import Probe, plan
from errorflow.calibration.session import (
    MAX_INFRA_IN_A_ROW,
    CalibrationError,
    ProbeResult,
    run_probes,
)
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    ModelBackend,
    ModelCallError,
    ModelRequest,
    ModelResponse,
    ToolCall,
)

TIMEOUT_S = 0.2
REPLY_S = 0.01


class SerialServer:
    """One request at a time, in the order they came; a call's client waits
    `TIMEOUT_S`, the server finishes the reply anyway."""

    def __init__(self, slow: Callable[[int], float]) -> None:
        self.slow = slow  # seconds the reply to the n-th call takes (0: `REPLY_S`)
        self.lock = asyncio.Lock()
        self.calls = 0
        self.timed_out = 0
        self.pings = 0
        self.most_at_once = 0
        self._waiting = 0

    async def _serve(self, seconds: float) -> None:
        self._waiting += 1
        self.most_at_once = max(self.most_at_once, self._waiting)
        async with self.lock:
            await asyncio.sleep(seconds)
        self._waiting -= 1

    async def _answered(self, seconds: float, within_s: float) -> bool:
        """Whether a request the server takes `seconds` over is answered within
        `within_s` (the server finishes it either way)."""
        job = asyncio.ensure_future(self._serve(seconds))
        try:
            await asyncio.wait_for(asyncio.shield(job), within_s)
        except TimeoutError:
            return False
        return True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        n, self.calls = self.calls, self.calls + 1
        if not await self._answered(self.slow(n) or REPLY_S, TIMEOUT_S):
            self.timed_out += 1
            said = f"the model server at fake did not answer in {TIMEOUT_S:g}s"
            raise ModelCallError(ErrorCode.INFRA_FAULT, said, infrastructure=said, timed_out=True)
        return ModelResponse()

    async def wait_free(self, wait_s: float) -> str | None:
        self.pings += 1
        if await self._answered(0.001, wait_s):
            return None
        return f"the model server at fake did not answer in {wait_s:g}s"


def probes(n: int) -> list[Probe]:
    return plan(7, n, ["first_call"])


def run(
    server: SerialServer, n: int, *, concurrency: int, wait_s: float | None
) -> list[ProbeResult]:
    def backend_for(_: Probe) -> ModelBackend:
        return server

    wait = None if wait_s is None else (lambda: server.wait_free(wait_s))
    return asyncio.run(run_probes(probes(n), backend_for, concurrency=concurrency, wait_free=wait))


@pytest.mark.parametrize("concurrency", [1, 2, 4])
def test_a_slow_reply_costs_its_probes_not_the_calibration(concurrency: int) -> None:
    server = SerialServer(lambda n: 1.0 if n == 1 else 0)  # five timeouts long
    results = run(server, 12, concurrency=concurrency, wait_s=3.0)
    lost = [r for r in results if r.error]
    # the slow call, and those sent with it that queued behind it, time out; one wait
    assert 1 <= len(lost) <= concurrency and all(r.timed_out for r in lost)
    assert server.pings == 1 and server.timed_out == len(lost)
    assert sum(1 for r in results if r.replies == 1) == 12 - len(lost)


@pytest.mark.parametrize("concurrency", [2, 4])
def test_without_the_wait_the_calls_behind_a_slow_reply_stop_the_calibration(
    concurrency: int,
) -> None:
    server = SerialServer(lambda n: 1.0 if n == 1 else 0)
    with pytest.raises(CalibrationError, match="in a row failed"):
        run(server, 12, concurrency=concurrency, wait_s=None)


def test_a_server_that_does_not_answer_again_stops_the_calibration() -> None:
    server = SerialServer(lambda n: 5.0 if n == 0 else 0)
    with pytest.raises(CalibrationError, match=r"timed out .*did not answer again.*in 0.5s"):
        run(server, 6, concurrency=2, wait_s=0.5)
    assert server.pings == 1


def test_a_server_too_slow_for_every_call_stops_at_the_third_failure_in_a_row() -> None:
    server = SerialServer(lambda n: 0.3)  # every reply outlasts its client
    with pytest.raises(CalibrationError, match="3 model calls in a row failed"):
        run(server, 12, concurrency=2, wait_s=3.0)
    assert server.pings == MAX_INFRA_IN_A_ROW - 1  # not after the failure that stops it


def test_a_timeout_of_the_last_probe_is_not_waited_for() -> None:
    server = SerialServer(lambda n: 5.0 if n == 3 else 0)  # never free again in time
    results = run(server, 4, concurrency=1, wait_s=0.5)
    assert [bool(r.error) for r in results] == [False, False, False, True]
    assert server.pings == 0


def test_no_call_is_sent_while_the_server_is_waited_for() -> None:
    server = SerialServer(lambda n: 1.0 if n in (0, 5) else 0)
    results = run(server, 10, concurrency=2, wait_s=3.0)
    assert server.pings == 2 and sum(1 for r in results if r.error) <= 4
    # only the calls sent together queue at once (and a ping behind them)
    assert server.most_at_once <= 3


class TurnsServer:
    """Probe 0's call times out once probe 1's first turn is sent; probe 1 (two turns)
    gets its first reply once the wait for the server has begun, and its second turn
    must be sent only after the server answered again."""

    def __init__(self) -> None:
        self.sent = asyncio.Event()
        self.waiting = asyncio.Event()
        self.answered_again = asyncio.Event()
        self.second_turn_after_the_wait: list[bool] = []

    def backend_for(self, probe: Probe) -> ModelBackend:
        server = self

        class Backend:
            async def complete(self, request: ModelRequest) -> ModelResponse:
                if probe.index == 0:
                    await server.sent.wait()
                    said = "the model server at fake did not answer in 1s"
                    raise ModelCallError(
                        ErrorCode.INFRA_FAULT, said, infrastructure=said, timed_out=True
                    )
                if len(request.turns) == len(probe.request.turns):  # the first turn
                    server.sent.set()
                    await server.waiting.wait()
                    return ModelResponse(calls=[ToolCall("c1", "lookup", {})])
                server.second_turn_after_the_wait.append(server.answered_again.is_set())
                return ModelResponse()

        return Backend()

    async def wait_free(self) -> str | None:
        self.waiting.set()
        await asyncio.sleep(0.05)
        self.answered_again.set()
        return None


def test_a_conversation_s_next_turn_waits_too() -> None:
    server = TurnsServer()
    asked = plan(7, 3, ["failed_upstream"])  # a family that wants a final answer
    results = asyncio.run(
        run_probes(asked, server.backend_for, concurrency=2, wait_free=server.wait_free)
    )
    assert server.second_turn_after_the_wait == [True, True]  # probes 1 and 2
    assert results[0].timed_out and [r.replies for r in results] == [0, 2, 2]
