"""Profile files: every parameter says where it came from; a scenario names one by its
path; a profile file with a built-in's values gives that built-in's outcomes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from errorflow import api
from errorflow.scenario.bundled import scenarios_dir
from errorflow.scenario.loader import ScenarioError, load, load_json
from errorflow.scenario.overrides import apply
from errorflow.scenario.provenance.builtin import BUILTIN_ORIGINS, builtin_origins
from errorflow.scenario.provenance.origin import Measured
from errorflow.scenario.provenance.profile_file import (
    BEHAVIOUR_FIELDS,
    ProfileDoc,
    ProfileError,
    parse_profile,
    profile_yaml,
)
from errorflow.scenario.spec.profiles import PROFILES, Tendencies


def _doc_like(builtin: str, measured: dict[str, float] | None = None) -> ProfileDoc:
    """A profile file with a built-in's values (some marked measured)."""
    values = PROFILES[builtin].model_dump()
    params: dict[str, object] = {}
    for field in BEHAVIOUR_FIELDS:
        entry: dict[str, object] = {"value": values[field], "assumed": "copied"}
        if measured and field in measured:
            entry = {
                "value": measured[field],
                "measured": {"model": "m", "backend": "openai", "date": "2026-12-04",
                             "family": "f", "probes": 10, "successes": 5,
                             "interval": [0.24, 0.76]},
            }  # fmt: skip
        params[field] = entry
    return ProfileDoc.model_validate(
        {"format": "errorflow-profile", "version": 1, "name": "copy", "parameters": params}
    )


def _scenario_with(tmp_path: Path, profile: str) -> Path:
    data = yaml.safe_load((scenarios_dir() / "contamination.yaml").read_text())
    for agent in data["agents"].values():
        agent.setdefault("model", {})["profile"] = profile
    data["trials"] = 12
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def test_every_builtin_parameter_says_where_it_came_from() -> None:
    assert set(BUILTIN_ORIGINS) == set(PROFILES)
    for name in PROFILES:
        origins = builtin_origins(name)
        assert list(origins) == list(Tendencies.model_fields)
    small = builtin_origins("small-local")
    # fitted to seed 000 where it counts the behaviour; the rest assumed, never "measured"
    assert small["p_repair_with_options"].kind == "fitted"
    assert small["p_repair_with_options"].fitted.successes == 32  # type: ignore[union-attr]
    assert small["p_heed_upstream"].kind == "assumed"
    assert {o.kind for o in builtin_origins("frontier").values()} == {"assumed"}


def test_a_file_with_the_builtins_values_gives_its_outcomes(tmp_path: Path) -> None:
    (tmp_path / "copy.yaml").write_text(profile_yaml(_doc_like("small-local")))
    by_file = api.run(load(_scenario_with(tmp_path, "./copy.yaml")), db=tmp_path / "a.db")
    builtin = api.run(load(_scenario_with(tmp_path, "small-local")), db=tmp_path / "b.db")
    assert [r["outcome"] for r in by_file.records()] == [r["outcome"] for r in builtin.records()]


def test_the_files_values_are_what_the_model_acts_on(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(
        profile_yaml(_doc_like("small-local", {"p_heed_upstream": 0.25}))
    )
    scenario = load(_scenario_with(tmp_path, "./m.yaml"))
    model = scenario.agents["writer"].model
    assert model.tendencies().p_heed_upstream == 0.25
    view = model.profile_view()
    assert view.name == "copy" and view.source == "./m.yaml"
    assert view.origins["p_heed_upstream"].kind == "measured"
    assert view.counts()["measured"] == 1
    # an override is its own origin
    changed = apply(scenario, {"agents.writer.model.params": {"p_flag_empty": 0.5}})
    origins = changed.agents["writer"].model.profile_view().origins
    assert origins["p_flag_empty"].summary() == "assumed: set in the scenario (model.params)"


def test_the_stored_scenario_carries_the_profile(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(profile_yaml(_doc_like("frontier")))
    scenario = load(_scenario_with(tmp_path, "./m.yaml"))
    (tmp_path / "m.yaml").unlink()
    again = load_json(scenario.model_dump_json())
    assert again.agents["writer"].model.tendencies() == PROFILES["frontier"]
    # back to a built-in: the file's content goes
    builtin = apply(again, {"agents.writer.model.profile": "small-local"})
    assert builtin.agents["writer"].model.profile_file is None
    assert "profile_file" not in builtin.agents["writer"].model.model_dump()


def test_an_old_scenario_dumps_as_before() -> None:
    scenario = load(scenarios_dir() / "contamination.yaml")
    assert "profile_file" not in scenario.agents["writer"].model.model_dump()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda p: p.pop("p_flag_empty"), "missing parameter(s) p_flag_empty"),
        (lambda p: p.update(p_bogus={"value": 1, "assumed": "x"}), "unknown parameter"),
        (lambda p: p["p_flag_empty"].pop("assumed"), "exactly one of measured"),
        (lambda p: p["p_flag_empty"].update(value=1.5), "less than or equal to 1"),
    ],
)
def test_bad_profile_files_are_refused(change: object, says: str) -> None:
    data = yaml.safe_load(profile_yaml(_doc_like("small-local")))
    change(data["parameters"])  # type: ignore[operator]
    with pytest.raises(
        ProfileError, match=r"m\.yaml: .*" + says.replace("(", r"\(").replace(")", r"\)")
    ):
        parse_profile(yaml.safe_dump(data), "m.yaml")


def test_a_measured_interval_must_hold_its_estimate() -> None:
    with pytest.raises(ValueError, match="exceed probes"):
        Measured(model="m", backend="b", date="d", family="f", probes=2, successes=3,
                 interval=[0.1, 0.2])  # fmt: skip


def test_a_missing_profile_file_is_reported_at_its_line(tmp_path: Path) -> None:
    path = _scenario_with(tmp_path, "./gone.yaml")
    with pytest.raises(ScenarioError) as info:
        load(path)
    problem = info.value.problems[0]
    assert problem.path.endswith("model.profile") and problem.line is not None
    assert "gone.yaml" in problem.message


def test_profiles_command_shows_origins(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(
        profile_yaml(_doc_like("small-local", {"p_heed_upstream": 0.5}))
    )
    shown = subprocess.run(
        [sys.executable, "-m", "errorflow", "profiles", "small-local", str(tmp_path / "m.yaml"),
         "--json"], capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    doc = yaml.safe_load(shown)
    assert doc["small-local"]["counts"] == {"measured": 0, "fitted": 6, "assumed": 10}
    heed = doc[str(tmp_path / "m.yaml")]["parameters"]["p_heed_upstream"]
    assert heed["origin"] == "measured" and "5/10 probes" in heed["says"]
