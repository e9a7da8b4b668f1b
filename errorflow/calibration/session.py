"""Running the probes against a model backend: each probe's conversation (one reply, or
up to `MAX_TURNS` for a family that wants a final answer: a call in between gets the
observation the probe's tool gives), then its classification.

A model call errorflow's infrastructure failed (the server unreachable or silent, the
key refused, a cassette without the reply) leaves that probe unclassified, with the
reason; `MAX_INFRA_IN_A_ROW` such failures in a row stop the calibration (the server is
gone: nothing more would be measured). After a call timed out, the next wait for the
server to answer again (`run_probes`). Any other failed call (an unusable reply) leaves
its probe unclassified too.
"""

from __future__ import annotations

import asyncio
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


async def run_probes(
    probes: list[Probe],
    backend_for: Callable[[Probe], ModelBackend],
    *,
    concurrency: int = 4,
    on_done: Callable[[ProbeResult], None] | None = None,
    wait_free: Callable[[], Awaitable[str | None]] | None = None,
) -> list[ProbeResult]:
    """Every probe's result, in the order of `probes`.

    After a probe's call timed out, `wait_free` (when given) holds the next calls back
    until the server answers again (None), for a server that answers one request at a
    time goes on with the reply its client gave up on, and what is sent meanwhile would
    time out behind it. Calls already sent when it began that time out too join the same
    wait; it counts once towards `MAX_INFRA_IN_A_ROW`. A server that does not answer
    again (a reason) stops the calibration."""
    gate = asyncio.Semaphore(concurrency)
    free = asyncio.Event()
    free.set()
    in_a_row = 0
    last_error = ""
    waiting: asyncio.Task[None] | None = None

    async def recover(timed_out: str) -> None:
        nonlocal waiting
        assert wait_free is not None
        why = await wait_free()
        if why is not None:
            said = f"a call timed out ({timed_out}); the server did not answer again: {why}"
            raise CalibrationError(said)
        waiting = None
        free.set()

    def counted(result: ProbeResult) -> None:
        nonlocal in_a_row, last_error, waiting
        if not result.infrastructure:
            in_a_row = 0
            return
        last_error = f"{MAX_INFRA_IN_A_ROW} model calls in a row failed: {result.error}"
        if not result.timed_out or wait_free is None:
            in_a_row += 1
        elif waiting is None:  # the first of its kind: the server is waited for, once
            in_a_row += 1
            free.clear()
            waiting = group.create_task(recover(result.error or "a model call timed out"))

    async def one(probe: Probe) -> ProbeResult:
        async with gate:
            await free.wait()  # (cleared while the server is waited for)
            if in_a_row >= MAX_INFRA_IN_A_ROW:
                raise CalibrationError(last_error)
            result = await converse(probe, backend_for(probe))
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
    return [t.result() for t in tasks]
