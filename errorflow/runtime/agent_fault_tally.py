"""Where each configured agent or model fault fired, and the trials where it never did.

A fault that shaped a message (or, for a model fault, the work behind it) says so under
the message's `trace.faults`
(errorflow.agents.agent_faults.mark_fired); when a trial is over the runner hands its
messages here. A fault that did not fire in a trial is no evidence about it, so the
run's summary counts, per `agent.kind`, the trials it fired in and those it never did.
"""

from __future__ import annotations

from collections import Counter

from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.result import ResultPayload
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.summary import BusFaultCount, bus_fault_counts


class AgentFaultTally:
    def __init__(self, scenario: Scenario) -> None:
        kinds = [
            f"{name}.{fault.kind}"
            for name, agent in scenario.agents.items()
            for fault in agent.faults
        ]
        kinds += [
            f"{name}.model.{fault.kind}"
            for name, agent in scenario.agents.items()
            for fault in agent.model.faults
        ]
        #: `agent.kind` and `agent.model.kind` (a crash of an `errorflow agent` process
        #: is counted by the runner's crash accounting, not here).
        self.kinds = list(dict.fromkeys(kinds))
        self.fired: dict[int, dict[str, int]] = {}
        self.trials = 0

    def finish(self, trial: int, messages: list[Envelope]) -> None:
        if not self.kinds:
            return
        self.trials += 1
        seen: Counter[str] = Counter()
        for m in messages:
            if m.kind is not Kind.RESULT:
                continue
            for f in ResultPayload.from_wire(m.payload).faults:
                if f"{m.sender}.{f.kind}" in self.kinds:
                    seen[f"{m.sender}.{f.kind}"] += 1
        if seen:
            self.fired[trial] = dict(seen)

    def counts(self) -> dict[str, BusFaultCount] | None:
        if not self.kinds:
            return None
        return bus_fault_counts(self.kinds, self.fired, self.trials)
