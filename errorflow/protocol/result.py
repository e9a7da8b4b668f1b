"""An agent's result message: its payload.

The payload carries the answer and, under `trace`, simulator bookkeeping for the scorer
and the reports (costs, the codes of the reported failures) that a model never sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic import JsonValue

from errorflow.core.costs import Costs
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.claims import FinalAnswer, answer_to_wire
from errorflow.protocol.envelope import JsonObject
from errorflow.protocol.stop import StopReason


@dataclass(frozen=True)
class ResultPayload:
    role: str
    round: int
    answer: FinalAnswer
    stopped: StopReason | None
    #: None: nothing to report (a crash, or a copy whose costs another recipient's
    #: copy already carries); on the wire `{}`.
    costs: Costs | None
    failures: list[ErrorCode]
    #: The agent's policy decisions, counted (errorflow.agents.policy_tally); sent with
    #: the costs, once.
    policy: dict[str, float] = field(default_factory=dict)
    #: Run time at which the agent finished (runs whose state lives across trials).
    ended_at: float | None = None
    #: Injected tool faults that fired on the agent's calls, by their place in the
    #: scenario; sent with the costs, once (errorflow.runtime.tool_fault_tally).
    tool_faults: dict[str, int] = field(default_factory=dict)

    def without_costs(self) -> ResultPayload:
        return replace(self, costs=None, policy={}, tool_faults={})

    def to_wire(self) -> JsonObject:
        costs: dict[str, JsonValue] = {}
        if self.costs is not None:
            costs.update(self.costs.to_wire())
        trace: JsonObject = {"costs": costs, "failures": [code.value for code in self.failures]}
        if self.policy:
            trace["policy"] = dict(self.policy)
        if self.tool_faults:
            trace["tool_faults"] = dict(self.tool_faults)
        wire: JsonObject = {
            "role": self.role,
            "round": self.round,
            "answer": answer_to_wire(self.answer),
            "stopped": None if self.stopped is None else self.stopped.wire,
            "trace": trace,
        }
        if self.ended_at is not None:
            wire["t"] = self.ended_at
        return wire
