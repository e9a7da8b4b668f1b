"""Where each configured agent fault fired, and the trials where it never did.

A fault that shaped a message says so under the message's `trace.faults`
(errorflow.agents.agent_faults.mark_fired); when a trial is over the runner hands its
messages here. A fault that did not fire in a trial is no evidence about it, so the
run's summary counts, per `agent.kind`, the trials it fired in and those it never did.
"""

from __future__ import annotations

from collections import Counter

from errorflow.bus.envelope import Envelope, Kind
from errorflow.scenario.model import Scenario
from errorflow.scoring.summary import BusFaultCount, bus_fault_counts

#: Kinds recorded on messages (a crash is counted by its own events).
RECORDED = ("corrupt", "faulty", "drop", "hang", "slow")


class AgentFaultTally:
    def __init__(self, scenario: Scenario) -> None:
        self.kinds = [
            f"{name}.{fault.kind}"
            for name, agent in scenario.agents.items()
            for fault in agent.faults
            if fault.kind in RECORDED
        ]
        self.kinds = list(dict.fromkeys(self.kinds))
        self.fired: dict[int, dict[str, int]] = {}
        self.trials = 0

    def finish(self, trial: int, messages: list[Envelope]) -> None:
        if not self.kinds:
            return
        self.trials += 1
        seen: Counter[str] = Counter()
        for m in messages:
            trace = m.payload.get("trace") if m.kind is Kind.RESULT else None
            faults = trace.get("faults") if isinstance(trace, dict) else None
            for f in faults if isinstance(faults, list) else ():
                if isinstance(f, dict) and f"{m.sender}.{f.get('kind')}" in self.kinds:
                    seen[f"{m.sender}.{f.get('kind')}"] += 1
        if seen:
            self.fired[trial] = dict(seen)

    def counts(self) -> dict[str, BusFaultCount] | None:
        if not self.kinds:
            return None
        return bus_fault_counts(self.kinds, self.fired, self.trials)
