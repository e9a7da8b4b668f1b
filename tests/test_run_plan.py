from __future__ import annotations

import pytest

from errorflow.scenario.overrides import InvalidOverride
from errorflow.scenario.run_plan import PlanDamaged, RunPlan, RunSettings
from errorflow.scenario.spec import identity
from tests.conftest import scenario


def test_a_plan_is_the_scenario_with_its_settings_validated_once() -> None:
    s = scenario("contamination")
    plan = RunPlan.of(s, trials=3, seed=7, propagation="implicit")
    assert (plan.trials, plan.seed, plan.propagation) == (3, 7, "implicit")
    assert plan.name == s.name and plan.sha == identity.sha(plan.scenario)
    assert RunPlan.of(s).scenario is s  # no setting: the scenario itself
    with pytest.raises(InvalidOverride):
        RunPlan.of(s, trials=0)


def test_a_plan_is_frozen() -> None:
    plan = RunPlan.of(scenario("contamination"))
    with pytest.raises(AttributeError):
        plan.scenario = scenario("outage")  # type: ignore[misc]


def test_a_plan_comes_back_from_the_wire_by_its_digest() -> None:
    plan = RunPlan.of(scenario("contamination"), trials=5)
    again = RunPlan.from_wire(plan.to_wire(), plan.sha)
    assert again.scenario == plan.scenario and again.sha == plan.sha
    other = RunPlan.of(scenario("contamination"), trials=6)
    with pytest.raises(PlanDamaged):
        RunPlan.from_wire(other.to_wire(), plan.sha)


def test_run_settings_say_what_they_give() -> None:
    assert RunSettings().given() == {}
    assert RunSettings(trials=3, propagation="implicit").given() == {
        "trials": 3,
        "propagation": "implicit",
    }
