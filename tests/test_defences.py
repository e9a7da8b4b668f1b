"""Defences (errorflow.scenario.spec.defence_model): Challenger, Inspector and the genealogy
guard each lower contamination on the same seeds, and their cost is counted."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from errorflow import api
from errorflow.cli.main import main
from errorflow.scenario.overrides import apply

BAD = [{"kind": "corrupt", "p": 0.5, "claims": 0.6}]
NEEDS = [
    {"id": f"n{i}", "tool": "q", "arg": "name", "wording": f"fact {i}", "value": f"m.{i}"}
    for i in range(5)
]
BASE = {
    "name": "defended",
    "seed": 8,
    "trials": 80,
    "world": {"metrics": {f"m.{i}": 100 * (i + 1) for i in range(5)}},
    "tools": {"q": {"kind": "metric_store"}},
    "agents": {
        "a": {"role": "researcher", "tools": ["q"], "sends_to": ["b"]},
        "b": {"role": "writer", "sends_to": ["c"], "faults": BAD},
        "c": {"role": "writer", "tools": ["q"]},
    },
    "task": {"prompt": "five facts", "needs": NEEDS},
}


def _run(overrides: dict[str, object]) -> api.Result:
    return api.run(apply(api.load_scenario(BASE), overrides))


def _backend(res: api.Result) -> float:
    return float(res.raw.summary["metrics"]["per_trial"]["backend_calls"])


def test_challenger_and_inspector_lower_contamination_at_a_counted_cost() -> None:
    none = _run({})
    challenger = _run({"agents.c.challenge": 1.0})
    inspector = _run({"agents.c.inspector": {"tools": ["q"]}})
    assert none.outcomes["contaminated"] > 20
    assert challenger.outcomes["contaminated"] < none.outcomes["contaminated"] / 4
    assert inspector.outcomes["contaminated"] < none.outcomes["contaminated"] / 4
    assert _backend(challenger) > _backend(none) and _backend(inspector) > _backend(none)


def test_the_genealogy_guard_catches_what_a_spot_check_misses() -> None:
    spot = {"tools": ["q"], "check": 0.3, "on_wrong": "correct"}
    detect = _run({"agents.c.inspector": {**spot, "genealogy": False}})
    guard = _run({"agents.c.inspector": {**spot, "genealogy": True}})
    assert guard.outcomes["contaminated"] < detect.outcomes["contaminated"]
    assert _backend(guard) > _backend(detect)  # the re-derivations


def test_blocking_withholds_what_it_finds_wrong() -> None:
    none = _run({})
    block = _run({"agents.c.inspector": {"tools": ["q"], "on_wrong": "block"}})
    # c looks the blocked facts up itself (a writer fetches what it was not given)
    assert block.outcomes["contaminated"] < 5
    assert block.outcomes["success"] > none.outcomes["success"]


def test_every_defence_that_acts_says_so_on_the_bus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "d.db")
    assert main(["run", "lineage-guard", "--trials", "20", "--db", db, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT envelope FROM events WHERE run_id = ?", (run_id,)).fetchall()
    acted = [
        e["payload"] for e in (json.loads(r[0]) for r in rows) if e["payload"]["type"] == "defence"
    ]
    fired = [e for e in (json.loads(r[0]) for r in rows) if e["payload"]["type"] == "agent_fault"]
    assert fired and acted  # corruption fired, and the spot check caught some of it
    assert all(a["agent"] == "c" and a["defence"] == "inspector" for a in acted)
    assert all(a["about"] == "b" and (a["corrected"] or a["blocked"]) for a in acted)
