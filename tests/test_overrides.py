import pytest

from errorflow.scenario.overrides import (
    OverrideError,
    apply,
    parse_value,
    set_path,
    with_settings,
    without_faults,
)
from tests.conftest import scenario


def test_set_path_in_dicts_and_lists() -> None:
    data: dict[str, object] = {"a": {"b": [1, {"c": 2}]}}
    set_path(data, "a.b.1.c", 5)
    set_path(data, "a.new.x", True)
    assert data == {"a": {"b": [1, {"c": 5}], "new": {"x": True}}}
    with pytest.raises(OverrideError):
        set_path(data, "a.b.9", 1)
    with pytest.raises(OverrideError):
        set_path(data, "a.b.x", 1)


def test_apply_validates_the_whole_scenario() -> None:
    s = scenario("contamination")
    t = apply(s, {"agents.researcher.policy.strategy": "classify", "trials": 7})
    assert t.agents["researcher"].policy.strategy == "classify" and t.trials == 7
    assert t.agents["researcher"].policy.config.retry.max_attempts == 3  # the classify preset
    with pytest.raises(OverrideError):
        apply(s, {"trials": -1})


def test_apply_builds_the_policy_it_sets() -> None:
    s = scenario("contamination")
    with pytest.raises(OverrideError, match="unknown strategy 'yolo'"):
        apply(s, {"agents.researcher.policy.strategy": "yolo"})
    with pytest.raises(OverrideError, match="max_attempts"):
        apply(s, {"agents.researcher.policy.retry.max_attempts": 0})


def test_with_settings_is_the_one_place_run_settings_apply() -> None:
    s = scenario("contamination")
    assert with_settings(s) is s
    t = with_settings(s, trials=3, seed=9, propagation="implicit")
    assert (t.trials, t.seed, t.propagation) == (3, 9, "implicit")
    assert with_settings(t, trials=None, seed=None, propagation=None) is t
    assert (
        t.model_copy(update={"trials": s.trials, "seed": s.seed, "propagation": s.propagation}) == s
    )


def test_parse_value_reads_yaml() -> None:
    assert parse_value("3") == 3 and parse_value("0.5") == 0.5
    assert parse_value("[a, b]") == ["a", "b"] and parse_value("classify") == "classify"


def test_without_faults() -> None:
    s = scenario("contamination")
    assert s.tools["search_papers"].faults
    assert not without_faults(s).tools["search_papers"].faults
