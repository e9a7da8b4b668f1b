"""The runner's account of an agent process that an injected crash killed.

An `errorflow agent` process whose crash fault fires says so (an `agent_crashed` event
with `process: true`, on its events topic) and dies (errorflow/runtime/agent_process.py).
The runner, which listens to the events of the agents that have a crash fault when they
run as processes, then:

* scores every trial the process held (inputs it was given and had not answered) as
  what it is, an injected failure: `contained` (the trial delivered no answer and the
  crash is known), or `contaminated` when a final message that did arrive states a
  false claim; the reason starts with `CRASHED` and names the fault. Never an
  `infra_fault`: the experiment asked for the crash;
* marks the agent suspect at once (errorflow/runtime/liveness.py), so the rest of the
  run waits the grace period for a replacement: an agent process started again with the
  same options joins on the next roll call and takes the work still open (not the
  trials already scored), and the run goes on; if none comes, the run stops as for any
  lost participant, its trials still in flight `infra_fault` (rerun by `--resume`) and
  the message says the agent crashed.

Pure: the runner does the I/O.
"""

from __future__ import annotations

import dataclasses

from errorflow.faults.crash import CrashFault
from errorflow.protocol.events import AgentCrashed
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome, TrialScore

#: The reason of a trial an injected crash took with its process starts so.
CRASHED = "crashed: "


def crash_watched(scenario: Scenario) -> list[str]:
    """Agents with a crash fault: the runner hears their events when they are processes."""
    return [
        name
        for name, agent in scenario.agents.items()
        if any(isinstance(f, CrashFault) for f in agent.faults)
    ]


def what(event: AgentCrashed, trial: int) -> str:
    """What happened to the agent's process, as a clause (`crashed at model call ...`)."""
    return f"crashed at model call {event.call} of trial {trial}: injected fault {event.fault}"


def crash_reason(event: AgentCrashed, struck: int, trial: int) -> str:
    """The reason of `trial`, one the crash in trial `struck` took with its process."""
    held = "" if trial == struck else " with this trial in flight"
    return f"{CRASHED}agent {event.agent} {what(event, struck)}; its process died{held}"


def crash_score(base: TrialScore, reason: str) -> TrialScore:
    """A trial the crash took, from its score on what arrived (`base`, which has no final
    result from the crashed agent): contaminated if a final message that did arrive
    states a false claim, else contained."""
    if base.outcome is Outcome.CONTAMINATED:
        return dataclasses.replace(base, reason=f"{reason}; {base.reason}")
    return dataclasses.replace(base, outcome=Outcome.CONTAINED, depth=0, reason=reason)


def crashed_by_injection(score: TrialScore) -> bool:
    return score.reason.startswith(CRASHED)
