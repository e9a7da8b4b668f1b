"""The `sweep:` block: up to three axes, measures that must name an axis and a value."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import load_scenario
from errorflow.scenario.problems import ScenarioError
from errorflow.scenario.spec.model import SweepSpec

AXIS: dict[str, object] = {"values": {"a": {}, "b": {}}}
THREE = [{"name": n, **AXIS} for n in ("x", "y", "z")]


def spec(measures: object = None, axes: object = THREE) -> SweepSpec:
    data: dict[str, object] = {"axes": axes}
    if measures is not None:
        data["measures"] = measures
    return SweepSpec.model_validate(data)


def errors(measures: object, axes: object = THREE) -> list[tuple[object, str]]:
    with pytest.raises(ValidationError) as exc:
        spec(measures, axes)
    return [(e["loc"], e["msg"]) for e in exc.value.errors()]


def test_three_axes_are_allowed_four_are_not() -> None:
    assert len(spec().axes) == 3
    with pytest.raises(ValidationError, match="at most 3"):
        spec(axes=[*THREE, {"name": "w", **AXIS}])


def test_measures_name_an_axis_and_one_of_its_values() -> None:
    ok = spec({"drop": {"against": {"axis": "y", "value": "a"}}})
    assert ok.measures is not None
    assert list(ok.measures.declared()) == ["drop"]
    found = errors(
        {
            "drop": {"against": {"axis": "yy", "value": "a"}},
            "amplification": {"against": {"axis": "x", "value": "c"}},
        }
    )
    assert found[0][0] == ("measures", "drop", "against", "axis")
    assert "did you mean 'y'" in found[0][1]
    assert found[1][0] == ("measures", "amplification", "against", "value")
    assert "unknown value of axis 'x' 'c'" in found[1][1]


def test_recovered_needs_a_drop_along_another_axis() -> None:
    ((loc, msg),) = errors({"recovered": {"against": {"axis": "z", "value": "a"}}})
    assert loc == ("measures", "recovered") and "declare `drop`" in msg
    same = {"axis": "z", "value": "a"}
    ((loc, msg),) = errors({"drop": {"against": same}, "recovered": {"against": same}})
    assert "expected two axes" in msg


def test_axis_names_are_unique_when_measures_name_them() -> None:
    twice = [{"name": "x", **AXIS}, {"name": "x", **AXIS}]
    spec(axes=twice)  # an older file without measures still loads
    ((loc, _),) = errors({"drop": {"against": {"axis": "x", "value": "a"}}}, twice)
    assert loc == ("axes", 1, "name")


def test_a_sweep_without_measures_dumps_as_before() -> None:
    dumped = load_scenario(resolve("strategy-matrix")).model_dump(mode="json")["sweep"]
    assert set(dumped) == {"axes"}


def test_the_loader_points_at_the_measure_line(tmp_path: Path) -> None:
    text = resolve("topologies").read_text()
    text += "  measures:\n    drop: {against: {axis: propagation, value: explict}}\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(bad)
    line = len(text.splitlines())
    assert f"bad.yaml:{line}:" in str(exc.value)
    assert "sweep.measures.drop.against.value" in str(exc.value)
    assert "did you mean 'explicit'" in str(exc.value)
