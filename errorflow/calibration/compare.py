"""Simulation against reality, side by side: a scenario run with its real models and
with its calibrated simulation (every real agent's model replaced by the simulated
model with a profile, its injected model faults kept), on the same trials, seeds and
faults; per outcome and per agent both rates and their paired difference.

Trials are paired by number (the same trial has the same faults in both runs), so the
difference is the paired one (Newcombe's interval, exact McNemar: errorflow.scoring.
stats.paired_difference). A trial either run did not measure (an infrastructure fault,
a bus fault) is left out of every pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from errorflow.core.errors import InputError
from errorflow.runtime.experiment import Arm
from errorflow.scenario.overrides import apply
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.stats import PairedDifference, paired_difference
from errorflow.scoring.summary import NOT_MEASURED
from errorflow.store.agent_labels import AgentLabels

REAL, SIMULATED = "real", "simulated"
OUTCOMES = ("success", "contained", "contaminated")
LABELS = ("contained", "contaminated")
#: Outcomes that leave a trial out of every pair: no final answer was scored (a trial
#: that timed out with a slow real model is a bus fault, not a model's outcome).
UNPAIRED = NOT_MEASURED | {Outcome.BUS_FAULT}


class CompareError(InputError):
    """A comparison that cannot be made as asked, in one line."""


def simulated_twin(scenario: Scenario, profile: str) -> Scenario:
    """The scenario with every real model replaced by the simulated one acting on
    `profile` (a built-in's name or a profile file's path), its model faults kept."""
    overrides: dict[str, object] = {}
    for name, agent in scenario.agents.items():
        model = agent.model
        if model.backend == "simulated":
            continue
        twin: dict[str, object] = {"backend": "simulated", "profile": profile}
        if model.faults:
            twin["faults"] = [f.model_dump(mode="json") for f in model.faults]
        overrides[f"agents.{name}.model"] = twin
    if not overrides:
        raise CompareError(
            f"no agent of {scenario.name} calls a real model: nothing to compare the "
            "simulation with (give an agent `model: {backend: openai, ...}`)"
        )
    return apply(scenario, overrides)


def compare_arms(scenario: Scenario, profile: str) -> list[Arm]:
    return [
        Arm(REAL, RunPlan(scenario)),
        Arm(SIMULATED, RunPlan(simulated_twin(scenario, profile))),
    ]


@dataclass(frozen=True)
class Row:
    """One measure: its rate in each run and their paired difference (real − simulated)."""

    measure: str
    real: float
    simulated: float
    difference: PairedDifference


def _row(measure: str, a: list[bool], b: list[bool]) -> Row:
    n = len(a) or 1
    return Row(measure, sum(a) / n, sum(b) / n, paired_difference(a, b))


def compare(
    real: Sequence[TrialScore],
    simulated: Sequence[TrialScore],
    real_labels: AgentLabels,
    simulated_labels: AgentLabels,
) -> list[Row]:
    """Rows for each outcome, then for each agent's contained and contaminated share
    (from each run's worst label per agent and trial: errorflow.store.agent_labels)."""
    by_trial = {s.trial: s for s in simulated}
    pairs = [
        (r, by_trial[r.trial])
        for r in sorted(real, key=lambda s: s.trial)
        if r.trial in by_trial
        and r.outcome not in UNPAIRED
        and by_trial[r.trial].outcome not in UNPAIRED
    ]
    rows = [
        _row(
            f"outcome {o}",
            [r.outcome.value == o for r, _ in pairs],
            [s.outcome.value == o for _, s in pairs],
        )
        for o in OUTCOMES
    ]
    worst = [(real_labels.get(r.trial, {}), simulated_labels.get(s.trial, {})) for r, s in pairs]
    agents = sorted({a for wr, ws in worst for a in (*wr, *ws)})
    for agent in agents:
        for label in LABELS:
            rows.append(
                _row(
                    f"{agent} {label}",
                    [wr.get(agent) == label for wr, _ in worst],
                    [ws.get(agent) == label for _, ws in worst],
                )
            )
    return rows


def rows_json(rows: list[Row]) -> dict[str, dict[str, object]]:
    return {r.measure: {"real": r.real, "simulated": r.simulated, **r.difference} for r in rows}
