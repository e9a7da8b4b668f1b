"""Attaching to a run it did not start, the TUI learns the scenario from the roll call."""

from __future__ import annotations

import json

from errorflow.bus.envelope import Envelope, Kind
from errorflow.core.redact import redact
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


def event(payload: dict[str, object], sender: str = "researcher", trial: int = 0) -> Envelope:
    return Envelope(
        run_id="r1",
        trial=trial,
        seq=0,
        sender=sender,
        recipient="observers",
        kind=Kind.EVENT,
        trace_id="t",
        payload=payload,
    )


def test_agent_events_update_the_agent_and_the_status_line() -> None:
    model = RunModel("r1", scenario("contamination"))
    steps: list[tuple[dict[str, object], str]] = [
        ({"type": "agent_start", "agent": "researcher", "inputs": []}, "researcher: agent_start"),
        (
            {
                "type": "tool_call",
                "agent": "researcher",
                "tool": "metrics",
                "call_id": "c1",
                "args": {},
                "ok": False,
                "code": "permission_denied",
                "attempts": 1,
            },
            "researcher: tool metrics failed permission_denied",
        ),
        (
            {
                "type": "retry",
                "agent": "researcher",
                "tool": "metrics",
                "attempt": 1,
                "code": "timeout",
                "delay_s": 0.5,
            },
            "researcher: retry metrics timeout",
        ),
        (
            {
                "type": "model_error",
                "agent": "researcher",
                "code": "rate_limit",
                "attempt": 1,
                "retry": True,
                "delay_s": 1.0,
            },
            "researcher: model_error  rate_limit",
        ),
        (
            {
                "type": "breaker",
                "agent": "researcher",
                "tool": "metrics",
                "from": "closed",
                "to": "open",
                "at": 3.0,
                "reason": "5 failures",
            },
            "researcher: breaker metrics closed → open",
        ),
        (
            {
                "type": "model_call",
                "agent": "researcher",
                "input_tokens": 10,
                "output_tokens": 5,
                "calls": 1,
                "final": True,
            },
            "researcher: model_call",
        ),
    ]
    for payload, line in steps:
        model.apply(event(payload))
        assert model.last_event == line
    view = model.agents["researcher"]
    assert view.working == {0} and view.steps == 1 and view.retries == 2
    assert view.last_error == "rate_limit"
    assert view.breakers["metrics"] == "open"
    # an event no known kind parses is counted and changes nothing
    model.apply(event({"type": "model_call", "agent": "researcher"}))  # fields missing
    model.apply(event({"type": "teleport", "agent": "ghost"}))
    assert model.unknown_events == 2 and "ghost" not in model.agents
    assert view.steps == 1 and model.last_event == "researcher: model_call"


def test_the_runners_verdicts_are_the_authority() -> None:
    model = RunModel("r1")  # attached, no scenario: only the runner's verdicts count
    outcome = {"type": "trial_outcome", "outcome": "contaminated", "depth": 2, "reason": "x"}
    model.apply(event(outcome, sender="runner", trial=4))
    assert model.trials[4].outcome == "contaminated" and model.trials[4].authoritative
    assert model.trials[4].depth == 2 and model.done == 1
    bogus = {**outcome, "outcome": "exploded"}
    model.apply(event(bogus, sender="runner", trial=5))  # not an outcome: ignored
    assert 5 not in model.trials
    # the same event from an agent is no verdict
    model.apply(event({**outcome, "outcome": "success"}, sender="writer", trial=6))
    assert 6 not in model.trials and model.last_event == "writer: trial_outcome"


def test_end_of_run_comes_only_from_the_runner() -> None:
    model = RunModel("r1")

    def control(sender: str, payload: dict[str, object]) -> Envelope:
        return Envelope(
            run_id="r1",
            trial=0,
            seq=0,
            sender=sender,
            recipient="all",
            kind=Kind.CONTROL,
            trace_id="t",
            payload=payload,
        )

    model.apply(control("writer", {"action": "end"}))
    model.apply(control("runner", {"action": "ack", "id": "x"}))
    assert not model.ended
    model.apply(control("runner", {"action": "end"}))
    assert model.ended and model.last_event == "runner: end of run"
