"""When an agent's work on a trial starts, in run time.

Runs whose state lives across trials (services, run-scoped breakers) have a run clock:
a trial starts when it arrives (errorflow.scenario.spec.run_time), and an agent starts when
its last input was sent (the `t` its sender's result carries). Every other run keeps
a clock per agent and trial that starts at 0, as it always did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from errorflow.protocol.result import ResultPayload
from errorflow.scenario.agent_plan import AgentPlan


class Sent(Protocol):
    @property
    def payload(self) -> Mapping[str, object]: ...


def start_time(plan: AgentPlan, trial: int, inputs: Sequence[Sent]) -> float:
    if not plan.run_scoped:
        return 0.0
    sent = (ResultPayload.from_wire(m.payload).ended_at for m in inputs)
    times = [t for t in sent if t is not None]
    return max([plan.arrival(trial), *times])
