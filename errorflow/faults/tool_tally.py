"""Where each configured tool fault fired, and the trials where it never did.

Every agent counts the tool faults that fired on its calls (by their place in the
scenario, `tools.kpi.faults[0]`) and sends the counts with its result, under
`trace.tool_faults`, so the runner needs only a trial's messages, whatever process
each agent ran in. A per-trial fault (`bad_args`) is not a call's: it fires for a
trial, when the task withholds an identifier, and is counted from the scenario. A
fault that did not fire in a trial measured the fault-free path for it: the run's
summary counts those trials too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Protocol

from errorflow.faults.tally import PlacedFaultTally
from errorflow.faults.tool_base import ToolFaultBase, withheld
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.result import tool_faults_of


class _Tool(Protocol):
    @property
    def faults(self) -> Sequence[ToolFaultBase]: ...


class _Need(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def tool(self) -> str: ...


class ToolFaultTally(PlacedFaultTally):
    def __init__(self, tools: Mapping[str, _Tool], needs: Sequence[_Need], seed: int) -> None:
        kinds = {
            f"tools.{name}.faults[{i}]": fault.kind
            for name, tool in tools.items()
            for i, fault in enumerate(tool.faults)
        }
        super().__init__(kinds, tool_faults_of)
        self.tools, self.needs, self.seed = tools, needs, seed

    def seen(self, trial: int, messages: Sequence[Envelope]) -> Counter[str]:
        seen = super().seen(trial, messages)
        seen.update(self._withheld(trial))
        return seen

    def _withheld(self, trial: int) -> Counter[str]:
        """The per-trial fault of each need whose identifier the trial withholds."""
        out: Counter[str] = Counter()
        for need in self.needs:
            place = withheld(self.tools[need.tool].faults, self.seed, trial, need.id)
            if place is not None:
                out[f"tools.{need.tool}.faults[{place}]"] += 1
        return out
