"""Finding what matters: the feed's filter, the trial view, the policy panel; the keys
offered in attach mode; `tui` and `serve` take `run`'s options and a sweep's cell."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from textual.widgets import Input, Static
from textual.widgets._footer import FooterKey

from errorflow.bus.transport import InProcessBus
from errorflow.cli.commands.tui import (
    BadInput,
    build_session,
    serve_command,
    serve_templates,
)
from errorflow.cli.errors import UsageError
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.scoring.score import Label
from errorflow.tui.agent_table import agent_table
from errorflow.tui.app import ErrorflowApp
from errorflow.tui.feed_filter import parse_filter
from errorflow.tui.header import header_line
from errorflow.tui.session import Session
from errorflow.tui.sources import BusHolder
from errorflow.tui.state import FeedItem, RunModel
from errorflow.tui.trial_view import TrialScreen, genealogy, trial_text
from tests.conftest import scenario
from tests.test_tui import live_session, settled, text_of, wait_until

SIX = str(Path(__file__).parent / "tui_scenarios" / "six.yaml")


def msg(trial: int, sender: str, recipient: str, mid: str, parents: tuple[str, ...] = (),
        kind: Kind = Kind.RESULT) -> Envelope:  # fmt: skip
    return Envelope(id=mid, run_id="r", trial=trial, seq=0, sender=sender, recipient=recipient,
                    kind=kind, trace_id="t", derived_from=list(parents))  # fmt: skip


def test_filter_words_are_labels_trials_or_agents() -> None:
    f = parse_filter("contaminated Writer t3 #4")
    assert f.labels == {Label.CONTAMINATED} and f.trials == {3, 4} and f.agents == ("writer",)
    item = FeedItem(msg(3, "researcher", "writer", "m"), Label.CONTAMINATED)
    assert f.matches(item)
    assert not f.matches(FeedItem(msg(5, "researcher", "writer", "m"), Label.CONTAMINATED))
    assert not f.matches(FeedItem(msg(3, "researcher", "writer", "m"), Label.CONTAINED))
    assert parse_filter("cont").agents == ("cont",)  # two labels start so: a name
    assert parse_filter("contai").labels == {Label.CONTAINED}
    assert not parse_filter("  ").active


def test_genealogy_reads_provenance_forwards() -> None:
    messages = [
        msg(0, "runner", "planner", "t", kind=Kind.TASK),
        msg(0, "planner", "a", "p1", ("t",)),
        msg(0, "planner", "b", "p2", ("t",)),
        msg(0, "a", "writer", "a1", ("p1",)),
        msg(0, "b", "writer", "b1", ("p2",)),
        msg(0, "writer", "runner", "w", ("a1", "b1")),
    ]
    order = [(depth, m.id, others) for depth, m, others in genealogy(messages)]
    assert order == [(0, "t", []), (1, "p1", []), (2, "a1", []), (1, "p2", []),
                     (2, "b1", []), (3, "w", ["a1"])]  # fmt: skip


async def test_filter_and_trial_view_in_the_app(tmp_path: Path) -> None:
    app = ErrorflowApp(live_session(tmp_path / "v.db", "implicit", trials=3))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: settled(app))
        everything = len(app.feed.items)
        await pilot.press("slash")
        assert app.query_one("#filter", Input).has_focus
        await pilot.press(*"writer t1", "enter")
        listed = list(app.feed.items)
        assert listed and len(listed) < everything
        assert all(i.env.trial == 1 and "writer" in (i.env.sender + i.env.recipient)
                   for i in listed)  # fmt: skip
        assert "writer t1" in str(app.feed.border_title)
        await pilot.press("t")  # the highlighted message's trial
        assert isinstance(app.screen, TrialScreen) and app.screen.trial == 1
        shown = text_of(app.screen.query_one("#trial-body", Static))
        assert "trial 1  contaminated" in shown
        assert "researcher → writer" in shown and "writer → runner" in shown
        assert "✗ contaminated  false claim(s) stated as certain" in shown  # label, reason
        assert "tool search_papers failed permission_denied" in shown  # its policy events
        await pilot.press("escape")
        await pilot.press("slash", "escape")  # escape clears the filter
        assert len(app.feed.items) == everything and not app.feed.filter.active


def test_policy_panel_counts_the_typed_events() -> None:
    model = RunModel("r", scenario("contamination"))
    events = [
        {"type": "retry", "agent": "researcher", "tool": "search_papers", "attempt": 1,
         "code": "timeout", "delay_s": 0.5},
        {"type": "retries_exhausted", "agent": "researcher", "tool": "search_papers",
         "attempts": 3, "code": "timeout", "reason": "gave up"},
        {"type": "guard", "agent": "researcher", "tool": "search_papers",
         "code": "repeated_call_blocked", "message": "same call"},
        {"type": "breaker", "agent": "researcher", "tool": "search_papers", "from": "closed",
         "to": "open", "at": 1.0, "reason": "failures"},
        {"type": "loop_stop", "agent": "researcher", "code": "step_limit", "stopped": "x",
         "steps": 8},
    ]  # fmt: skip
    for trial, payload in enumerate(events):
        model.apply(Envelope(run_id="r", trial=trial, seq=0, sender="researcher",
                             recipient="observers", kind=Kind.EVENT, trace_id="t",
                             payload=payload))  # fmt: skip
    agent = model.agents["researcher"]
    assert (agent.retries, agent.exhausted, agent.guard_blocks, agent.loop_stops) == (1, 1, 1, 1)
    assert [(s.trial, s.frm, s.to) for s in agent.breaker_steps] == [(3, "closed", "open")]
    assert len(model.trial_events) == 5  # each listed in its trial's view
    from rich.console import Console

    console = Console(width=160, record=True, color_system=None)
    console.print(agent_table(model, 160))
    text = console.export_text()
    assert "search_papers closed→open t3" in text and "search_papers open" in text
    assert trial_text(model, 9) is not None  # a trial never seen: said so, no crash


async def test_attach_without_the_scenario_offers_only_keys_that_work() -> None:
    holder = BusHolder(bus=InProcessBus())
    app = ErrorflowApp(Session("attach", holder, Path("unused.db"), None, "run-x"))
    async with app.run_test(size=(120, 24)) as pilot:
        await pilot.pause(0.2)

        def offered() -> set[str]:
            return {k.description for k in app.query(FooterKey)}

        # The footer fills in once the app has laid out (later on a loaded machine).
        await wait_until(pilot, lambda: {"pause", "help", "quit"} <= offered())
        assert not {"flip", "compare", "step"} & offered()
        await pilot.press("p")  # not offered, and pressing it does nothing
        assert app.session.mode == "attach" and app.runs_started == 1
        await pilot.press("space")
        await wait_until(pilot, lambda: "step" in offered())  # offered while paused


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(scenario=None, attach=None, replay=None, speed=1.0,
                                   db="x.db", broker=None, trials=None, seed=None,
                                   propagation=None, set=None, cell=None, port=8000)  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def test_tui_takes_runs_options_and_a_sweep_cell(tmp_path: Path) -> None:
    db = str(tmp_path / "o.db")
    s = build_session(_args(scenario=SIX, db=db, trials=3, seed=5, propagation="explicit",
                            set=["agents.writer.model.profile=frontier"])).scenario  # fmt: skip
    assert s is not None and (s.trials, s.seed, s.propagation) == (3, 5, "explicit")
    assert s.agents["writer"].model.profile == "frontier"
    cell = build_session(_args(scenario="topologies", db=db, cell="hierarchy/implicit",
                               trials=4)).scenario  # fmt: skip
    assert cell is not None and "reviewer" in cell.agents and cell.propagation == "implicit"
    assert cell.trials == 4  # --trials wins over the cell's, as in `sweep`
    with pytest.raises(BadInput, match="hierarchy/implicit"):
        build_session(_args(scenario="topologies", db=db, cell="hierarchy/implicid"))
    with pytest.raises(BadInput, match="no sweep"):
        build_session(_args(scenario="contamination", db=db, cell="x"))
    with pytest.raises(UsageError, match="--set"):
        build_session(_args(scenario="contamination", db=db, set=["trials"]))


def test_serve_passes_the_options_on_to_each_tab() -> None:
    command = serve_command(_args(scenario="topologies", cell="chain/explicit", speed=2.0,
                                  set=["seed=4"], trials=5))  # fmt: skip
    assert "--cell chain/explicit" in command and "--speed 2.0" in command
    assert "--set seed=4" in command and "--trials 5" in command


@pytest.mark.parametrize("width", [30, 60, 80, 100, 142, 200])
def test_the_header_right_end_is_always_on_screen(width: int) -> None:
    model = RunModel("contamination-0123456789abcdef", scenario("contamination"))
    model.last_event = "researcher: tool search_papers failed permission_denied"
    line = header_line(model, "attach (unverified: no run key)", paused=True, pending=1234,
                       pace="×0.25", width=width)  # fmt: skip
    assert line.cell_len <= width
    assert line.plain.rstrip().endswith(("1234 queued", "…", "permission_denied"))
    assert "‖ paused  1234 queued" in line.plain
    wide = header_line(model, "live", paused=False, pending=0, pace="×1", width=width)
    assert wide.cell_len <= width and "queued" not in wide.plain


def test_the_served_page_measures_the_terminal_in_its_own_font(tmp_path: Path) -> None:
    page = (serve_templates(tmp_path) / "app_index.html").read_text()
    assert "fonts.googleapis.com" not in page  # no web font arriving after the fit
    assert "fonts/RobotoMono-VariableFont_wght.ttf" in page
    assert "html, body { margin: 0; padding: 0; overflow: hidden; }" in page
    assert page.index("document.fonts.load") < page.index("</head>")
