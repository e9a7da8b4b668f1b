"""What a run gives back: its scores, summary, rejects, kept messages, service load."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from errorflow.protocol.envelope import Envelope
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.service_load import ServiceJson
from errorflow.scoring.summary import RunJson, RunSummary


@dataclass
class RunResult:
    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    broker: str
    scores: Sequence[TrialScore]  # in trial order (a lazy view on long runs)
    summary: RunSummary
    rejects: dict[str, int] = field(default_factory=dict)
    messages: dict[int, list[Envelope]] = field(default_factory=dict)
    #: Load on each service (errorflow.scoring.service_load); empty without services.
    services: dict[str, ServiceJson] = field(default_factory=dict)
    #: Bus faults fired per trial, by kind (only trials where some fired).
    bus_faults: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def outcomes(self) -> dict[str, int]:
        return dict(self.summary["outcomes"])

    @property
    def infra_faults(self) -> int:
        """Trials the infrastructure failed (not scored): a run with any measured less
        than it was asked to."""
        return sum(1 for s in self.scores if s.outcome is Outcome.INFRA_FAULT)

    @property
    def infra_reasons(self) -> list[str]:
        """The distinct reasons of the infra-fault trials, in trial order."""
        reasons = (s.reason for s in self.scores if s.outcome is Outcome.INFRA_FAULT)
        return list(dict.fromkeys(reasons))

    def to_json(self) -> RunJson:
        doc: RunJson = {
            "run_id": self.run_id,
            "scenario": self.scenario,
            "seed": self.seed,
            "trials": self.trials,
            "propagation": self.propagation,
            "broker": self.broker,
            "outcomes": self.summary["outcomes"],
            "metrics": self.summary["metrics"],
            "rejects": self.rejects,
        }
        if self.services:
            doc["services"] = self.services
        if "bus_faults" in self.summary:
            doc["bus_faults"] = self.summary["bus_faults"]
        if "agent_faults" in self.summary:
            doc["agent_faults"] = self.summary["agent_faults"]
        if "tool_faults" in self.summary:
            doc["tool_faults"] = self.summary["tool_faults"]
        if "model_faults" in self.summary:
            doc["model_faults"] = self.summary["model_faults"]
        if "bus_recovery" in self.summary:
            doc["bus_recovery"] = self.summary["bus_recovery"]
        return doc


def new_run_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"
