"""Running the probes against a model backend: each probe's conversation (one reply, or
up to `MAX_TURNS` for a family that wants a final answer: a call in between gets the
observation the probe's tool gives), then its classification.

A model call errorflow's infrastructure failed (the server unreachable or silent, the
key refused, a cassette without the reply) leaves that probe unclassified, with the
reason; `MAX_INFRA_IN_A_ROW` such failures in a row stop the calibration (the server is
gone: nothing more would be measured). After a call timed out, the calls after it wait
for the server to answer again (`run_probes`). Any other failed call (an unusable reply)
leaves its probe unclassified too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from errorflow.calibration.classify import Verdicts, classify
from errorflow.calibration.probes import Probe
from errorflow.core.errors import ErrorflowError
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    AssistantTurn,
    ModelBackend,
    ModelCallError,
    ModelRequest,
    ModelResponse,
    ObservationTurn,
    Turn,
)
from errorflow.policies.classify import Failure
from errorflow.policies.observation import observe_failure

MAX_TURNS = 3
MAX_INFRA_IN_A_ROW = 3


class CalibrationError(ErrorflowError):
    """The calibration cannot go on (the model's infrastructure failed), in one line."""


@dataclass
class ProbeResult:
    probe: Probe
    verdicts: Verdicts
    replies: int = 0
    error: str | None = None
    calls: list[str] = field(default_factory=list)  # tool names the model called
    infrastructure: bool = False  # the error was errorflow's infrastructure's
    timed_out: bool = False  # the server did not answer in time (and may be busy still)


def _observations(probe: Probe, response: ModelResponse) -> list[Turn]:
    turns: list[Turn] = [AssistantTurn(response.calls)]
    for call in response.calls:
        if call.name == probe.tool and probe.repeat:
            turns.append(ObservationTurn(call.id, call.name, probe.repeat))
        else:
            unknown = Failure(ErrorCode.UNKNOWN_TOOL, call.name, f"no tool {call.name}",
                              options=(probe.tool,))  # fmt: skip
            obs = observe_failure(unknown, "actionable", tell_class=True)
            turns.append(ObservationTurn(call.id, call.name, obs))
    return turns


async def converse(probe: Probe, backend: ModelBackend) -> ProbeResult:
    request: ModelRequest = probe.request
    result = ProbeResult(probe, {})
    for _ in range(MAX_TURNS):
        try:
            response = await backend.complete(request)
        except ModelCallError as exc:
            result.infrastructure = exc.infrastructure is not None
            result.timed_out = exc.timed_out
            result.error = exc.infrastructure or f"{exc.code.value}: {exc}"
            result.verdicts = dict.fromkeys(classify(probe, ModelResponse()))
            return result
        result.replies += 1
        result.calls += [c.name for c in response.calls]
        if response.final is not None or not probe.wants_final or not response.calls:
            result.verdicts = classify(probe, response)
            return result
        request = replace(request, turns=[*request.turns, *_observations(probe, response)])
    result.verdicts = dict.fromkeys(classify(probe, ModelResponse()))
    result.error = f"no final answer in {MAX_TURNS} replies"
    return result


class _Held:
    """A probe's backend whose every call (each turn of a conversation) waits while the
    server is waited for, and stops once it did not answer again."""

    def __init__(self, backend: ModelBackend, free: asyncio.Event, stop: list[str]) -> None:
        self._backend, self._free, self._stop = backend, free, stop

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self._free.wait()
        if self._stop:
            raise CalibrationError(self._stop[0])
        return await self._backend.complete(request)


async def run_probes(
    probes: list[Probe],
    backend_for: Callable[[Probe], ModelBackend],
    *,
    concurrency: int = 4,
    on_done: Callable[[ProbeResult], None] | None = None,
    wait_free: Callable[[], Awaitable[str | None]] | None = None,
) -> list[ProbeResult]:
    """Every probe's result, in the order of `probes`.

    After a call timed out, `wait_free` (when given) holds every further call back until
    the server answers again (None): a server that answers one request at a time goes on
    with the reply its client gave up on, and what is sent meanwhile would time out
    behind it. Calls sent before the wait began that time out too join it; it counts
    once towards `MAX_INFRA_IN_A_ROW`. A server that does not answer again (a reason)
    stops the calibration. Nothing is held for when no probe is left, or when the
    failures in a row already stop it (the client's own wait may still ask the server
    once: errorflow/models/busy_server.py, which `wait_free` joins)."""
    gate = asyncio.Semaphore(concurrency)
    free = asyncio.Event()
    free.set()
    stop: list[str] = []  # why the server was given up on, once it was
    in_a_row = 0
    last_error = ""
    unfinished = len(probes)
    waiting: asyncio.Task[None] | None = None

    async def recover(timed_out: str) -> None:
        assert wait_free is not None
        why = await wait_free()
        if why is not None:
            stop.append(f"a call timed out ({timed_out}); the server did not answer again: {why}")
        free.set()

    def counted(result: ProbeResult) -> None:
        nonlocal in_a_row, last_error, waiting
        if not result.infrastructure:
            in_a_row = 0
            return
        last_error = f"{MAX_INFRA_IN_A_ROW} model calls in a row failed: {result.error}"
        waits = result.timed_out and wait_free is not None
        if waits and not free.is_set():
            return  # sent before the wait began: it joins the wait, counted once
        in_a_row += 1
        if waits and unfinished and in_a_row < MAX_INFRA_IN_A_ROW:
            free.clear()
            waiting = asyncio.create_task(recover(result.error or "no answer in time"))

    async def one(probe: Probe) -> ProbeResult:
        nonlocal unfinished
        async with gate:
            if in_a_row >= MAX_INFRA_IN_A_ROW:  # (a wait never raises it: checked now)
                raise CalibrationError(last_error)
            result = await converse(probe, _Held(backend_for(probe), free, stop))
            unfinished -= 1
            counted(result)
        if on_done is not None:
            on_done(result)
        return result

    # A task group: a stop cancels the probes still waiting; its error is raised as itself.
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(p)) for p in probes]
    except ExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    finally:
        if waiting is not None and not waiting.done():  # every probe is done: no need
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
    return [t.result() for t in tasks]
