"""What a Python tool may take besides its arguments: a `ToolContext`.

A tool whose code has randomness of its own (a flaky service it simulates, sampled
data) is reproducible when it draws from `ctx.random`: a stream seeded from the
scenario's seed, the trial, the calling agent, the tool and the call's index, so the
same seed gives the same answers and a rerun of one trial the same draws. A parameter
annotated `ToolContext` (or named `ctx` without an annotation) receives it; it is no
argument of the tool, so the model never sees or fills it.

The ground-truth call (the fault-free answer the scorer compares with) gets trial -1
and agent "": a tool whose *answer* depends on its draws has no single truth, so its
needs state theirs with `expect:`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from errorflow.core.seeding import stream

#: The trial number the ground-truth call carries.
TRUTH_TRIAL = -1


@dataclass(frozen=True)
class ToolContext:
    #: The scenario's seed.
    seed: int
    #: The trial that makes the call (TRUTH_TRIAL for the ground-truth call).
    trial: int
    #: The agent that makes the call ("" for the ground-truth call).
    agent: str
    #: The tool's name in the scenario.
    tool: str
    #: How many calls of this tool the agent made in this trial before this one.
    call: int
    #: Draws for the tool's own randomness, seeded from all of the above.
    random: random.Random

    @classmethod
    def of(cls, seed: int, trial: int, agent: str, tool: str, call: int) -> ToolContext:
        rng = stream(seed, "tool-context", trial, agent, tool, call)
        return cls(seed, trial, agent, tool, call, rng)

    @classmethod
    def for_truth(cls, seed: int, tool: str) -> ToolContext:
        return cls.of(seed, TRUTH_TRIAL, "", tool, 0)
