"""Where each configured tool fault fired, and the trials where it never did.

Every agent counts the tool faults that fired on its calls (by their place in the
scenario, `tools.kpi.faults[0]`) and sends the counts with its result, under
`trace.tool_faults`, so the runner needs only a trial's messages, whatever process
each agent ran in. A `bad_args` fault is not a call's: it fires for a trial, when the
task withholds an identifier (errorflow.world.tool_client.hidden_identifier), and is
counted from the scenario. A fault that did not fire in a trial measured the
fault-free path for it: the run's summary counts those trials too.
"""

from __future__ import annotations

from collections import Counter

from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.result import ResultPayload
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.summary import ToolFaultCount, bus_fault_counts
from errorflow.world.tool_client import hidden_identifier


class ToolFaultTally:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        #: Each configured fault's place and kind, in file order.
        self.kinds = {
            f"tools.{name}.faults[{i}]": fault.kind
            for name, tool in scenario.tools.items()
            for i, fault in enumerate(tool.faults)
        }
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
            for path, n in ResultPayload.from_wire(m.payload).tool_faults.items():
                if path in self.kinds:
                    seen[path] += n
        seen.update(self._withheld(trial))
        if seen:
            self.fired[trial] = dict(seen)

    def _withheld(self, trial: int) -> Counter[str]:
        """The `bad_args` fault of each need whose identifier the trial withholds (the
        first of its tool's, the one that decides)."""
        out: Counter[str] = Counter()
        for need in self.scenario.task.needs:
            faults = self.scenario.tools[need.tool].faults
            first = next((i for i, f in enumerate(faults) if f.kind == "bad_args"), None)
            if first is not None and hidden_identifier(self.scenario, trial, need):
                out[f"tools.{need.tool}.faults[{first}]"] += 1
        return out

    def counts(self) -> dict[str, ToolFaultCount] | None:
        if not self.kinds:
            return None
        counts = bus_fault_counts(list(self.kinds), self.fired, self.trials)
        return {path: {**c, "kind": self.kinds[path]} for path, c in counts.items()}
