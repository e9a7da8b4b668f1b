"""An agent's policy block in a scenario: built once, dumped exactly as written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from errorflow.policies.strategies import DEFAULT_STRATEGY, PRESETS, build_policy
from errorflow.scenario.spec.agent_policy import AgentPolicy, split
from errorflow.scenario.spec.model import AgentSpec, Scenario
from errorflow.scenario.spec.policy import policy_for
from tests.conftest import scenario


def test_split_names_the_default_strategy_when_none_is_written() -> None:
    assert split({"retry": {"max_attempts": 2}}) == (
        DEFAULT_STRATEGY,
        {"retry": {"max_attempts": 2}},
    )
    assert split({"strategy": "classify", "guards": {}}) == ("classify", {"guards": {}})


def test_default_is_the_default_strategy_as_written() -> None:
    policy = AgentPolicy.default()
    assert policy.written == {"strategy": DEFAULT_STRATEGY}
    assert policy.config == PRESETS[DEFAULT_STRATEGY] and policy.strategy == DEFAULT_STRATEGY
    assert AgentSpec(role="writer").policy == policy


def test_build_layers_the_overrides_onto_the_preset() -> None:
    written = {"retry": {"max_attempts": 2}, "strategy": "classify"}
    policy = AgentPolicy.build(written)
    assert policy.config == build_policy("classify", {"retry": {"max_attempts": 2}})
    written["strategy"] = "resilient"  # the block keeps its own copy
    assert policy.written == {"retry": {"max_attempts": 2}, "strategy": "classify"}


@pytest.mark.parametrize(
    ("written", "words"),
    [
        ({"strategy": "yolo"}, "unknown strategy 'yolo'"),
        ({"strategy": 5}, "expected a strategy name"),
        ({"retry": {"max_attempts": 0}}, "greater than or equal to 1"),
        ({"retyr": {}}, "Extra inputs are not permitted"),
    ],
)
def test_build_refuses_what_cannot_be_built(written: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        AgentPolicy.build(written)


def test_in_a_model_a_block_validates_and_dumps_as_written() -> None:
    written = {"retry": {"max_attempts": 2}, "strategy": "classify"}
    spec = AgentSpec.model_validate({"role": "researcher", "policy": written})
    assert spec.policy.config.retry.max_attempts == 2
    assert spec.model_dump()["policy"] == written
    assert list(spec.model_dump(mode="json")["policy"]) == ["retry", "strategy"]  # file order
    assert '"policy":{"retry":{"max_attempts":2},"strategy":"classify"}' in spec.model_dump_json()
    again = AgentSpec.model_validate({"role": "researcher", "policy": spec.policy})
    assert again.policy is spec.policy  # a built block is not built again


@pytest.mark.parametrize(
    ("block", "loc", "kind"),
    [
        (5, ("policy",), "dict_type"),
        ({"strategy": "yolo"}, ("policy",), "value_error"),
        ({"retry": {"max_attempts": 0}}, ("policy", "retry", "max_attempts"), "greater_than_equal"),
    ],
)
def test_in_a_model_a_bad_block_is_a_validation_error_at_its_path(
    block: object, loc: tuple[str, ...], kind: str
) -> None:
    with pytest.raises(ValidationError) as info:
        AgentSpec.model_validate({"role": "researcher", "policy": block})
    (error,) = info.value.errors()
    assert (error["loc"], error["type"]) == (loc, kind)


def test_policy_for_is_the_config_built_with_the_scenario() -> None:
    s = scenario("contamination")
    assert policy_for(s, "researcher") is s.agents["researcher"].policy.config
    assert policy_for(s, "researcher") is policy_for(s, "researcher")  # built once
    assert policy_for(s, "researcher") == build_policy(DEFAULT_STRATEGY)


def test_a_dumped_scenario_validates_to_the_same_policies() -> None:
    s = scenario("strategy-matrix")
    again = Scenario.model_validate(s.model_dump())
    assert again == s
    assert all(again.agents[n].policy.config == a.policy.config for n, a in s.agents.items())


def test_the_built_config_is_frozen() -> None:
    policy = AgentPolicy.default()
    with pytest.raises(ValidationError):
        policy.config.retry.max_attempts = 9  # type: ignore[misc]
