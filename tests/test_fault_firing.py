"""Which injected faults fired in each trial, and which trials a configured fault never
touched (a fault that did not fire is not evidence)."""

from __future__ import annotations

from errorflow.core.events import AgentCrashed, ModelCall, ModelFaultFired
from errorflow.scenario.overrides import apply
from errorflow.scoring.fault_firing import (
    ConfiguredFault,
    configured_faults,
    fired_faults,
    trial_firing,
    unfired_trials,
)
from tests.conftest import scenario

OVERLOAD = "agents.writer.model.faults[0]"
CRASH = "agents.researcher.faults[0]"


def fired(path: str = OVERLOAD) -> ModelFaultFired:
    return ModelFaultFired(agent="writer", fault=path, kind="overloaded", call=0, attempt=1)


def test_the_configured_faults_are_the_model_faults_and_the_announced_agent_faults() -> None:
    s = apply(
        scenario("contamination"),
        {
            "agents.writer.model.faults": [{"kind": "overloaded", "p": 0.1}, {"kind": "timeout"}],
            "agents.researcher.faults": [{"kind": "crash", "trial": 3}],
        },
    )
    assert configured_faults(s) == [
        ConfiguredFault(CRASH, "crash", trial=3),
        ConfiguredFault(OVERLOAD, "overloaded"),
        ConfiguredFault("agents.writer.model.faults[1]", "timeout"),
    ]
    assert configured_faults(s, agent_kinds=()) == configured_faults(s)[1:]


def test_fired_faults_are_counted_from_typed_events_and_stored_payloads() -> None:
    crash = AgentCrashed(agent="researcher", fault=CRASH, call=0)
    events = [fired(), fired(), crash.to_payload(), ModelCall(
        agent="writer", input_tokens=1, output_tokens=1, calls=0, final=True
    )]  # fmt: skip
    assert fired_faults(events) == {OVERLOAD: 2, CRASH: 1}


def test_trials_where_a_configured_fault_never_fired_are_named() -> None:
    faults = [ConfiguredFault(OVERLOAD, "overloaded"), ConfiguredFault(CRASH, "crash", trial=1)]
    assert trial_firing(faults, 0, [fired()]).never == ()  # the crash cannot fire in trial 0
    assert trial_firing(faults, 1, [fired()]).never == (CRASH,)
    by_trial: dict[int, list[object]] = {0: [fired()], 1: [], 2: [fired(), fired()]}
    assert unfired_trials(faults, by_trial) == {OVERLOAD: [1], CRASH: [1]}
