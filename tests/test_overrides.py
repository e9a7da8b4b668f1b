from pathlib import Path

import pytest

from errorflow.bus.transport import InProcessBus
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.overrides import (
    InvalidOverride,
    OverrideError,
    apply,
    parse_value,
    set_path,
    with_settings,
    without_faults,
)
from errorflow.scenario.problems import ScenarioError
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


# -- one pipeline: an override or a setting meets every check a file meets ---------------


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ({"agents.researcher.policy.guards.max_steps": 5000}, "expected at most 1000 steps"),
        ({"task.needs.0.arg": "nosuch"}, "takes no argument 'nosuch'"),
        ({"world.documents": {"d": "x" * 70_000}}, "expected a document of at most 65536"),
        ({"description": "x" * 300_000}, "does not fit on the bus"),
        ({"agents.researcher.policy.retry.max_attempts": True}, "found true (a boolean)"),
        ({"trials": "abc"}, "trials: expected an integer, found 'abc' (a string)"),
    ],
    ids=["steps", "need-arg", "document", "roll-call", "policy-bool", "trials-type"],
)
def test_apply_runs_the_loaders_checks(override: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidOverride) as info:  # also an OverrideError and a ScenarioError
        apply(scenario("contamination"), override)
    assert isinstance(info.value, OverrideError) and isinstance(info.value, ScenarioError)
    text = str(info.value)
    assert words in text
    assert "validation error" not in text and "pydantic.dev" not in text  # no pydantic dump
    assert len(text.splitlines()) == len(info.value.problems) == 1


def test_with_settings_is_strict_and_checks_a_scenario_built_in_python() -> None:
    s = scenario("contamination")
    with pytest.raises(ScenarioError, match="trials: expected an integer, found true"):
        with_settings(s, trials=True)
    big = s.model_copy(update={"description": "x" * 300_000})  # the model alone accepts it
    with pytest.raises(ScenarioError, match="description: the scenario does not fit on the bus"):
        with_settings(big)


async def test_run_scenario_refuses_what_validate_refuses(tmp_path: Path) -> None:
    big = scenario("contamination").model_copy(update={"description": "x" * 300_000})
    db = tmp_path / "r.db"
    with pytest.raises(ScenarioError, match="does not fit on the bus"):
        await run_scenario(big, RunOptions(bus=InProcessBus(), db_path=db))
    assert not db.exists()  # refused before anything started


def test_a_path_error_names_its_path() -> None:
    with pytest.raises(OverrideError) as info:
        set_path({"a": [1]}, "a.5", 0)
    assert info.value.path == "a.5" and str(info.value).startswith("a.5: index 5 out of range")


BOMB = (
    "{a: &a [x, x, x, x, x, x, x, x, x], "
    + ", ".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "}"
)  # ~500 bytes, 9**9 strings expanded


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (BOMB, "YAML nodes"),
        ("[" * 1000, "levels of nesting"),
        ("9" * 5000, "at most 100 digits"),
        ('"\\udcff"', r"U\+DCFF"),
    ],
    ids=["alias bomb", "nesting", "digits", "surrogate"],
)
def test_a_value_has_the_limits_of_a_file(text: str, said: str) -> None:
    """Aliases are expanded and counted (shared, they would expand later, when the
    scenario is copied and validated: gigabytes from a value of 500 bytes)."""
    with pytest.raises(ScenarioError, match=said):
        parse_value(text, "--set x")


def test_text_that_is_not_yaml_is_a_string_still() -> None:
    assert parse_value("[") == "[" and parse_value("a: b: c") == "a: b: c"
    assert parse_value("") is None


@pytest.mark.parametrize(
    "index", ["-1", " 1", "1_0", "\u0661", "+1", "9" * 5000], ids=lambda i: i[:8]
)
def test_a_list_index_is_ascii_digits_from_0(index: str) -> None:
    """int() takes all of these (`-1` counting from the end); a path does not."""
    with pytest.raises(OverrideError, match=r"not a list index|out of range") as info:
        set_path({"a": [1, 2]}, f"a.{index}", 0)
    assert len(str(info.value).removeprefix(f"a.{index}: ")) < 200


@pytest.mark.parametrize("block", ["bus", "discussion", "arrivals"])
def test_a_block_set_to_null_is_its_default(block: str) -> None:
    """FORMAT.md gives these blocks' default as none: null says the same."""
    base = scenario("contamination")
    assert apply(base, {block: None}).model_dump() == base.model_dump()
