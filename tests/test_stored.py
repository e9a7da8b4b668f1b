"""A stored run's scenario read back without its code (errorflow.scenario.stored): the
store redacts a Python tool's file path, and what reads a run (the report's timeline,
the TUI, the Who&When export's ground truth) still works."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from errorflow.cli.main import main
from errorflow.scenario.bundled import resolve
from errorflow.scenario.stored import load_stored
from errorflow.store.readers import get_run

TOOLS = Path(__file__).resolve().parent / "own_systems" / "gen_tools.py"


def _outage_with_a_python_tool(tmp_path: Path) -> Path:
    """The bundled `outage` (a service, a run-scoped breaker) with a Python tool of a
    file next to the scenario, serving a second need."""
    data = yaml.safe_load(Path(resolve("outage")).read_text())
    data.pop("sweep", None)
    data["trials"] = 40
    shutil.copy(TOOLS, tmp_path / "gen_tools.py")
    data["tools"]["sum_up"] = {"kind": "python", "function": "gen_tools.py:scale"}
    data["agents"]["researcher"]["tools"].append("sum_up")
    data["task"]["needs"].append(
        {"id": "total", "tool": "sum_up", "wording": "the scaled four", "args": {"x": 4}}
    )
    path = tmp_path / "outage-py.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_a_run_with_a_python_tool_keeps_its_timeline_and_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.db")
    out = _run(capsys, "run", str(_outage_with_a_python_tool(tmp_path)), "--db", db, "--json", "-q")
    run_id = json.loads(out)["run_id"]
    run = get_run(Path(db), run_id)
    assert run is not None
    assert "[PATH]" in run["scenario_json"]  # the file's path is not stored ...
    scenario = load_stored(run["scenario_json"], run_id)  # ... and it reads back
    assert scenario.tools["sum_up"].kind == "python"
    assert run["truth"] is not None and run["truth"]["total"] == 10.0
    page = tmp_path / "r.html"
    _run(capsys, "report", run_id, "--db", db, "--format", "html", "-o", str(page))
    assert "No timeline" not in page.read_text() and ">search_api</text>" in page.read_text()
    _run(capsys, "export", run_id, "--db", db, "--format", "who-when", "-o", str(tmp_path / "w"))
    record = json.loads(next((tmp_path / "w").rglob("*.json")).read_text())
    assert record["ground_truth"] not in ("", "{}", None), record["ground_truth"]
