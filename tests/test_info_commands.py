"""`scenarios --json` and `validate --json`: the facts a script or an editor reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errorflow.cli.main import main
from errorflow.scenario.bundled import bundled


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def test_scenarios_as_json_lists_every_bundled_scenario(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, rows = _json(capsys, "scenarios", "--json")
    assert code == 0 and isinstance(rows, list)
    assert [r["name"] for r in rows] == list(bundled())
    contamination = next(r for r in rows if r["name"] == "contamination")
    assert Path(contamination["path"]).is_file() and contamination["description"]


def test_a_valid_scenario_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "validate", "contamination", "--json")
    assert code == 0
    assert doc == {
        "ok": True,
        "file": "contamination",
        "scenario": "contamination",
        "agents": 2,
        "tools": 1,
        "trials": 20,
        "propagation": "explicit",
        "warnings": [],
    }


def test_every_problem_of_an_invalid_scenario_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntrials: true\n")
    code, doc = _json(capsys, "validate", str(bad), "--json")
    assert code == 2 and isinstance(doc, dict) and doc["ok"] is False
    by_path = {p["path"]: p for p in doc["problems"]}
    assert set(by_path) == {"agents", "task", "trials"}  # all of them, not the first two
    assert by_path["trials"] == {
        "file": str(bad),
        "line": 2,
        "column": 1,
        "path": "trials",
        "message": "expected an integer, found true (a boolean)",
    }
