"""Attaching to a run it did not start, the TUI learns the scenario from the roll call."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from errorflow.bus.transport import InProcessBus
from errorflow.core.redact import redact
from errorflow.protocol import topics
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.tui.app import ErrorflowApp
from errorflow.tui.detail import DetailScreen
from errorflow.tui.session import Session
from errorflow.tui.sources import BusHolder, Sink
from errorflow.tui.state import RunModel
from tests.conftest import scenario
from tests.test_tui import wait_until


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


# -- hostile strings from the bus ----------------------------------------------------------

#: What a participant of the run (or anyone who can publish on its topics, when the run
#: has no key) can put in the strings the TUI shows: retitle the terminal, leave the
#: alternate screen, clear it, turn the line around, open Rich markup.
HOSTILE = "\x1b]0;PWNED-TITLE\x07[red]x[/]\x9b2J\u202eevil\x1b[?1049l"
SHOWN = "\\x1b]0;PWNED-TITLE\\x07[red]x[/]\\x9b2J\\u202eevil\\x1b[?1049l"
#: What Textual itself writes: colours (SGR) and cursor moves (CUP). Anything else that
#: is a control character came from the input.
TEXTUAL_SEQUENCE = re.compile(r"\x1b\[[0-9;]*[mH]")


def terminal_output(app: ErrorflowApp) -> str:
    """What the app sends the terminal to repaint its current screen in full (the
    headless test driver writes nothing, so the compositor is asked directly)."""
    update = app.screen._compositor.render_update(full=True)
    assert update is not None
    render: Callable[[Console], str] = update.render_segments  # type: ignore[union-attr]
    return render(app.console)


def hostile_control_characters(output: str) -> list[str]:
    rest = TEXTUAL_SEQUENCE.sub("", output)
    return [c for c in rest if c != "\n" and unicodedata.category(c) in {"Cc", "Cf"}]


def hostile_envelopes() -> list[Envelope]:
    def env(kind: Kind, payload: dict[str, object], **kw: object) -> Envelope:
        fields: dict[str, object] = dict(
            run_id="r1",
            trial=0,
            seq=0,
            sender="researcher",
            recipient="observers",
            kind=kind,
            trace_id="t",
        )
        return Envelope.model_validate({**fields, **kw, "payload": payload})  # fmt: skip

    return [
        env(Kind.EVENT, {"type": "breaker", "agent": "researcher" + HOSTILE, "tool": HOSTILE,
                         "from": "closed", "to": "open", "at": 1.0, "reason": HOSTILE}),
        env(Kind.EVENT, {"type": "loop_stop", "agent": "researcher", "code": HOSTILE,
                         "stopped": HOSTILE, "steps": 1}, seq=1),
        env(Kind.RESULT, {"text": HOSTILE, "claims": [HOSTILE]}, seq=2, recipient="writer",
            id="m-" + HOSTILE[:40], derived_from=[HOSTILE], trace_id=HOSTILE[:60]),
    ]  # fmt: skip


async def test_an_attached_tui_shows_hostile_strings_as_text(tmp_path: Path) -> None:
    bus = InProcessBus()
    session = Session("attach", BusHolder(bus=bus), tmp_path / "x.db", target="r1")
    app = ErrorflowApp(session)
    async with app.run_test(size=(150, 40)) as pilot:
        conn = await bus.connect("intruder")
        await pilot.pause(0.2)  # the TUI has subscribed
        for env in hostile_envelopes():
            topic = topics.for_message("r1", env.kind, env.sender, env.recipient)
            await conn.publish(topic, env.encode())
        await wait_until(pilot, lambda: app.feed.row_count == 1 and app.channel.model.events == 3)
        await pilot.pause(0.6)  # the side detail shows the highlighted message
        main = terminal_output(app)
        await pilot.press("enter")  # the whole envelope and its provenance
        assert isinstance(app.screen, DetailScreen)
        await pilot.pause(0.1)
        detail = terminal_output(app)
    for output in (main, detail):
        assert not hostile_control_characters(output)
        assert "\x1b]" not in output and "\x1b[?1049" not in output and "\x07" not in output
    shown = plain(main)
    assert SHOWN in shown  # the agent's last error: every control made visible, no markup
    assert re.search(r"╭─?researcher\\x1b\]…─*╮", shown)  # the graph's box of the agent
    assert "└ \\x1b]0;PWNED-TI… (not seen)" in plain(detail)  # the provenance
    # The envelope, still valid JSON: C1 and bidi controls are \u-escaped like the C0 ones.
    assert json.dumps(HOSTILE) in plain(detail)


def plain(output: str) -> str:
    return TEXTUAL_SEQUENCE.sub("", output)


class FailingSource:
    """A source whose failure message is hostile (an exception quoting the bus)."""

    run_id = "r1"
    scenario = None

    async def run(self, sink: Sink) -> None:
        raise ValueError(HOSTILE)


async def test_a_hostile_error_message_is_shown_as_text(tmp_path: Path) -> None:
    session = Session("attach", BusHolder(bus=InProcessBus()), tmp_path / "x.db", target="r1")
    session.first = FailingSource  # type: ignore[method-assign]
    app = ErrorflowApp(session)
    async with app.run_test(size=(150, 40), notifications=True) as pilot:
        await wait_until(pilot, lambda: app.channel.error is not None)
        await pilot.pause(0.3)  # the notification is up
        output = terminal_output(app)
    assert not hostile_control_characters(output)
    shown = plain(output)  # the notification, not read as markup
    assert "ValueError:" in shown and "\\x1b]0;PWNED-TITLE\\x07[red]x[/]" in shown
