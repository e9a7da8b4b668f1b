"""An injected agent crash (`agents.NAME.faults: [{kind: crash, ...}]`): the agent dies
at one of its model calls, mid-trial.

In-process, the trial's task dies (the agent reports the crash as its result, like any
exception in its own code); as an `errorflow agent` process, the whole process dies
(errorflow/runtime/agent_process.py) and the runner accounts for the trials it held
(errorflow/runtime/crashes.py). An injected crash is the experiment's, never an
infrastructure fault.

Where it fires: with probability `p` at each model call (each logical call, checked
before its first attempt), or at model call `call` (0: the first) of trial `trial`;
with both `p` and `trial`, only trial `trial`'s calls draw. The draw is a pure function
of (seed, trial, owner, fault index, call index): `crash_fires`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from errorflow.core.errors import ErrorflowError
from errorflow.core.seeding import stream
from errorflow.core.shapes import Probability, Strict
from errorflow.protocol.events import AgentCrashed


class CrashFault(Strict):
    kind: Literal["crash"]
    p: Probability | None = None
    #: Where in the agent's work the crash strikes (model calls are the steps of its loop).
    at: Literal["model_call"] = "model_call"
    #: Only this trial crashes (at model call `call`, or at each call with `p`).
    trial: int | None = Field(default=None, ge=0)
    call: int | None = Field(default=None, ge=0, le=1_000)

    @model_validator(mode="after")
    def _placed(self) -> CrashFault:
        if self.p is None and self.trial is None:
            raise ValueError("say where the crash fires: p (per model call) or trial")
        if self.call is not None and (self.trial is None or self.p is not None):
            raise ValueError("call places a crash in one trial: give it with trial, without p")
        return self


def crash_fires(
    fault: CrashFault, *, seed: int, trial: int, owner: str, index: int, call: int
) -> bool:
    """Whether `fault` (the agent's `index`-th) crashes `owner` at its model call `call`
    of `trial`. Pure: every process that runs the agent decides the same."""
    if fault.trial is not None and trial != fault.trial:
        return False
    if fault.p is None:
        return call == (fault.call or 0)
    return stream(seed, trial, owner, "crash", index, call).random() < fault.p


def crash_fault_path(agent: str, index: int) -> str:
    return f"agents.{agent}.faults[{index}]"


@dataclass(frozen=True)
class CrashNotice:
    """Where an injected crash struck: `owner` (the agent, or its revision round) at its
    model call `call` of `trial`."""

    agent: str
    owner: str
    trial: int
    call: int
    fault: str

    def event(self, *, process: bool) -> AgentCrashed:
        return AgentCrashed(agent=self.agent, fault=self.fault, call=self.call, process=process)

    def __str__(self) -> str:
        return f"injected crash ({self.fault}) at model call {self.call} of trial {self.trial}"


class InjectedCrash(ErrorflowError):
    """The agent crashed (injected): raised through the gate and the loop to the agent."""

    def __init__(self, notice: CrashNotice) -> None:
        super().__init__(str(notice))
        self.notice = notice


#: What an agent in a process of its own does with a crash: announce it and die.
OnCrash = Callable[[CrashNotice], Awaitable[None]]
