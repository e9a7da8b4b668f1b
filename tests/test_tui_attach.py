"""Attaching to a run it did not start, the TUI learns the scenario from the roll call."""

from __future__ import annotations

import json

from errorflow.bus.envelope import Envelope, Kind
from errorflow.policies.redact import redact
from errorflow.tui.state import RunModel
from tests.conftest import scenario


def test_roll_call_scenario_is_adopted() -> None:
    s = scenario("topologies")
    model = RunModel("r1")
    assert model.scenario is None and model.propagation == "?"
    model.apply(
        Envelope(
            run_id="r1",
            trial=0,
            seq=0,
            sender="runner",
            recipient="all",
            kind=Kind.CONTROL,
            trace_id="t",
            payload={"action": "roll_call", "scenario": json.loads(redact(s.model_dump_json()))},
        )
    )
    assert model.scenario is not None and model.total == s.trials
    assert model.propagation == "explicit"
    assert set(model.agents) == set(s.agents)
    assert ("researcher", "writer") in model.edges
    # a roll call from anyone else, or a broken one, changes nothing
    other = RunModel("r1")
    other.apply(
        Envelope(
            run_id="r1",
            trial=0,
            seq=0,
            sender="writer",
            recipient="all",
            kind=Kind.CONTROL,
            trace_id="t",
            payload={"action": "roll_call", "scenario": {"name": "x"}},
        )
    )
    assert other.scenario is None
