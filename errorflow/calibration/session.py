"""Running the probes against a model backend: each probe's conversation (one reply, or
up to `MAX_TURNS` for a family that wants a final answer: a call in between gets the
observation the probe's tool gives), then its classification.

A model call errorflow's infrastructure failed (the server unreachable, the key
refused, no such model, a cassette without the reply) stops the calibration: it
measured nothing. Any other failed call leaves that probe unclassified, with the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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


class CalibrationError(ErrorflowError):
    """The calibration cannot go on (the model's infrastructure failed), in one line."""


@dataclass
class ProbeResult:
    probe: Probe
    verdicts: Verdicts
    replies: int = 0
    error: str | None = None
    calls: list[str] = field(default_factory=list)  # tool names the model called


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
            if exc.infrastructure:
                raise CalibrationError(exc.infrastructure) from None
            result.error = f"{exc.code.value}: {exc}"
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
) -> list[ProbeResult]:
    """Every probe's result, in the order of `probes`."""
    gate = asyncio.Semaphore(concurrency)

    async def one(probe: Probe) -> ProbeResult:
        async with gate:
            result = await converse(probe, backend_for(probe))
        if on_done is not None:
            on_done(result)
        return result

    # A task group: the first infrastructure failure cancels the probes still running.
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(p)) for p in probes]
    return [t.result() for t in tasks]
