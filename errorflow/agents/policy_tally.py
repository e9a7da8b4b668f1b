"""Every policy decision of an agent's trial, counted: what `run`, `show` and `report`
print per agent (retries and backoff, breaker transitions, calls an open circuit
refused, limiter and bulkhead rejections, guard blocks by kind, loop stops by reason).

The agent counts the typed events as it emits them, and its result carries the counts
(`trace.policy`), so the runner sums them per agent with the costs, whatever process
the agent runs in. Pure.
"""

from __future__ import annotations

from collections import Counter

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.events import (
    AgentEvent,
    BreakerChange,
    CallRefused,
    GuardBlock,
    LoopStop,
    ModelError,
    ModelFaultFired,
    RetriesExhausted,
    RetryScheduled,
    ToolCallEvent,
)

#: Tool-call codes that are a client-side policy refusing the call, by counter name.
REFUSALS = {ErrorCode.CIRCUIT_OPEN: "refused_open"}


class PolicyTally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.backoff_s = 0.0
        #: Injected model faults that fired, by kind (not decisions: they go with the
        #: message's `trace.faults`), and by their place in the scenario (they go with
        #: the result's `trace.model_faults`, so a run counts each fault's trials and
        #: the attempts it failed).
        self.model_faults: Counter[str] = Counter()
        self.model_faults_at: Counter[str] = Counter()
        #: Injected tool faults that fired, by their place in the scenario (they go
        #: with the result's `trace.tool_faults` for the same reason).
        self.tool_faults: Counter[str] = Counter()

    def add(self, event: AgentEvent) -> None:
        c = self.counts
        if isinstance(event, RetryScheduled):
            c["retries"] += 1
            self.backoff_s += event.delay_s
        elif isinstance(event, RetriesExhausted):
            c["retries_exhausted"] += 1
        elif isinstance(event, BreakerChange):
            c[f"breaker_{event.to}"] += 1
        elif isinstance(event, GuardBlock):
            c[f"guard_{event.code.value}"] += 1
        elif isinstance(event, LoopStop):
            c[f"stop_{event.code}"] += 1
        elif isinstance(event, ModelError) and event.retry:
            c["model_retries"] += 1
            self.backoff_s += event.delay_s
        elif isinstance(event, ToolCallEvent):
            if event.code in REFUSALS:
                c[REFUSALS[event.code]] += 1
            self.tool_faults.update(event.faults)
        elif isinstance(event, CallRefused):
            c[f"{event.by}_rejected"] += 1
        elif isinstance(event, ModelFaultFired):
            self.model_faults[event.kind] += 1
            self.model_faults_at[event.fault] += 1

    def to_wire(self) -> dict[str, float]:
        """The non-zero counts (and backoff seconds), for the result's `trace.policy`."""
        out: dict[str, float] = {k: float(v) for k, v in sorted(self.counts.items()) if v}
        if self.backoff_s:
            out["backoff_s"] = round(self.backoff_s, 6)
        return out
