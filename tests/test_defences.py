"""Defences (errorflow.scenario.defence_model): Challenger, Inspector and the genealogy
guard each lower contamination on the same seeds, and their cost is counted."""

from __future__ import annotations

from errorflow import api
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
