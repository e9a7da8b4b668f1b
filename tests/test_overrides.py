import pytest

from errorflow.scenario.overrides import OverrideError, apply, parse_value, set_path, without_faults
from tests.conftest import scenario


def test_set_path_in_dicts_and_lists() -> None:
    data = {"a": {"b": [1, {"c": 2}]}}
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
    assert t.agents["researcher"].policy["strategy"] == "classify" and t.trials == 7
    with pytest.raises(OverrideError):
        apply(s, {"trials": -1})


def test_parse_value_reads_yaml() -> None:
    assert parse_value("3") == 3 and parse_value("0.5") == 0.5
    assert parse_value("[a, b]") == ["a", "b"] and parse_value("classify") == "classify"


def test_without_faults() -> None:
    s = scenario("contamination")
    assert s.tools["search_papers"].faults
    assert not without_faults(s).tools["search_papers"].faults
