"""Running the probes against a model backend: each probe's conversation (one reply, or
up to `MAX_TURNS` for a family that wants a final answer: a call in between gets the
observation the probe's tool gives), then its classification.

A model call errorflow's infrastructure failed (the server unreachable or silent, the
key refused, a cassette without the reply) leaves that probe unclassified, with the
reason; `MAX_INFRA_IN_A_ROW` such failures in a row stop the calibration (the server is
gone: nothing more would be measured). Any other failed call (an unusable reply) leaves
its probe unclassified too.
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
) -> list[ProbeResult]:
    """Every probe's result, in the order of `probes`."""
    gate = asyncio.Semaphore(concurrency)
    in_a_row = 0

    async def one(probe: Probe) -> ProbeResult:
        nonlocal in_a_row
        async with gate:
            if in_a_row >= MAX_INFRA_IN_A_ROW:
                raise CalibrationError(last_error[0])
            result = await converse(probe, backend_for(probe))
        in_a_row = in_a_row + 1 if result.infrastructure else 0
        if result.infrastructure and result.error:
            last_error[0] = f"{MAX_INFRA_IN_A_ROW} model calls in a row failed: {result.error}"
        if on_done is not None:
            on_done(result)
        return result

    last_error = [""]
    # A task group: a stop cancels the probes still waiting; its error is raised as itself.
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(p)) for p in probes]
    except ExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    return [t.result() for t in tasks]
