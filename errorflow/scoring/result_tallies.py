"""The fault counts a run reads from its trials' results: where each configured agent,
tool and model fault fired (errorflow.faults.agent, .tool_tally, .model_tally), fed a
finished trial at a time, by the run as it goes and by a resume from the store."""

from __future__ import annotations

from collections.abc import Sequence

from errorflow.faults.agent import AgentFaultTally
from errorflow.faults.model_tally import ModelFaultTally
from errorflow.faults.tally import FaultCount
from errorflow.faults.tool_tally import ToolFaultTally
from errorflow.protocol.envelope import Envelope
from errorflow.scenario.spec.model import Scenario


class ResultTallies:
    def __init__(self, scenario: Scenario) -> None:
        self.agent = AgentFaultTally(scenario.agents)
        self.tool = ToolFaultTally(scenario.tools, scenario.task.needs, scenario.seed)
        self.model = ModelFaultTally(scenario.agents)

    def finish(
        self,
        trial: int,
        messages: Sequence[Envelope],
        known: bool = True,
        crashed: str | None = None,
    ) -> None:
        """A trial is over: each tally counts it (the arguments: AgentFaultTally.finish)."""
        self.agent.finish(trial, messages, known, crashed)
        for tally in (self.tool, self.model):
            tally.finish(trial, messages, known)

    def counts(self) -> dict[str, dict[str, FaultCount]]:
        """By the summary's key, for the kinds configured (none configured: no key)."""
        found = {
            "agent_faults": self.agent.counts(),
            "tool_faults": self.tool.counts(),
            "model_faults": self.model.counts(),
        }
        return {key: dict(c) for key, c in found.items() if c is not None}
