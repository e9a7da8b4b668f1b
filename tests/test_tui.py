"""The TUI: the pure run model, the graph layout, the sources, and the app under Pilot.

Runs go over the in-process bus (same topics and envelopes as MQTT, no sockets), so
each live run of the bundled contamination scenario takes a fraction of a second.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from errorflow.bus.transport import InProcessBus
from errorflow.cli.commands.tui import BadInput, build_session, serve_command
from errorflow.protocol import topics
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome
from errorflow.store.readers import trial_rows
from errorflow.tui.app import ErrorflowApp
from errorflow.tui.compare import ArmPanel, CompareScreen
from errorflow.tui.detail import DetailScreen
from errorflow.tui.drawing.layout import layers, layout
from errorflow.tui.feed import FeedTable
from errorflow.tui.graph import GraphView
from errorflow.tui.session import Session
from errorflow.tui.sources import BusHolder, Sink, stored_envelopes
from errorflow.tui.state import AgentState, RunModel
from errorflow.tui.view import View
from tests.conftest import scenario

# -- helpers (also used by test_tui_snapshots.py) ---------------------------------------


def contamination(**update: object) -> Scenario:
    # One trial at a time: the order of events, and so every frame, is reproducible.
    return scenario("contamination", max_in_flight=1, **update)


def stored_run(db: Path, run_id: str, propagation: str, trials: int = 20) -> Scenario:
    """Run the contamination scenario into `db` (synchronously: snapshot tests are sync)."""
    s = contamination(propagation=propagation, trials=trials)
    options = RunOptions(bus=InProcessBus(), db_path=db, run_id=run_id)
    asyncio.run(run_scenario(s, options))
    return s


def live_session(db: Path, propagation: str, trials: int = 20) -> Session:
    return Session(
        "live", BusHolder(bus=InProcessBus()), db, contamination(propagation=propagation,
                                                                 trials=trials)
    )  # fmt: skip


def replay_session(db: Path, run_id: str) -> Session:
    args = argparse.Namespace(
        scenario=None, attach=None, replay=run_id, speed=0.0, db=str(db), broker=None,
        trials=None, seed=None, propagation=None,
    )  # fmt: skip
    session = build_session(args)
    session.holder = BusHolder(bus=InProcessBus())  # never start a broker in tests
    return session


async def wait_until(pilot: Pilot[int], cond: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


def text_of(widget: Widget) -> str:
    """What a Static or View shows, as plain text (rich renderables rendered wide)."""
    assert isinstance(widget, Static | View)
    console = Console(width=200, file=io.StringIO(), record=True, color_system=None)
    console.print(widget.content)
    return console.export_text()


def settled(app: ErrorflowApp) -> bool:
    """The run is over, everything is applied, and the arrows' pulse has faded."""
    ch = app.channel
    return ch.model.ended and not ch.pending and app.tick - app._last_arrival > 8


# -- the model ----------------------------------------------------------------------------


def test_model_replays_stored_run_to_the_stored_outcomes(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    s = stored_run(db, "m-implicit", "implicit", trials=6)
    model = RunModel("m-implicit", s)
    for _, text in stored_envelopes(db, "m-implicit"):
        model.apply(Envelope.model_validate_json(text))
    stored = {r["trial"]: r["outcome"] for r in trial_rows(db, "m-implicit")}
    assert {t: v.outcome for t, v in model.trials.items() if v.outcome} == stored
    assert model.ended and model.done == 6
    writer = model.agents["writer"]
    assert writer.state is AgentState.CONTAMINATED
    assert writer.steps > 0 and writer.confidence == 1.0
    assert model.edges[("researcher", "writer")].messages == 6
    assert model.contamination_history[-1] == 1.0


def test_a_replay_counts_what_the_run_counts_when_bus_faults_end_trials(tmp_path: Path) -> None:
    """Trials a bus fault ended are not in the run's labels or policy figures (their
    results never reached the runner): nor in the agents' boxes and policy panel."""
    import sqlite3

    from errorflow import api
    from tests.test_resume import FAULTY

    path = tmp_path / "lossy.yaml"
    lossy = "bus: {drop: {p: 0.03}, max_resends: 0, ack_timeout_s: 0.05}\ntask:\n"
    path.write_text(FAULTY.replace("task:\n", lossy).replace("trials: 12", "trials: 60"))
    db = tmp_path / "l.db"
    sc = api.load(str(path))
    res = api.run(sc, db=db)
    assert res.outcomes["bus_fault"] > 0
    model = RunModel(res.run_id, sc)
    for _, text in stored_envelopes(db, res.run_id):
        model.apply(Envelope.model_validate_json(text))
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT sender, label, count(*) FROM labels GROUP BY sender, label")
        labels = {(sender, label): n for sender, label, n in rows}
    policy = res.summary["metrics"]["policy"]
    for name, agent in model.agents.items():
        counts = {(name, lb.value): n for lb, n in agent.counts.items() if n}
        assert counts == {k: n for k, n in labels.items() if k[0] == name}, name
        mine = policy.get(name, {})
        assert agent.retries == mine.get("retries", 0) + mine.get("model_retries", 0), name
        assert agent.exhausted == mine.get("retries_exhausted", 0), name


def test_model_scores_a_trial_whose_task_arrives_last(tmp_path: Path) -> None:
    """Messages on different topics can arrive in any order: when the runner's task is
    the last of its trial to arrive, filing it completes the trial, which is scored
    locally (no runner verdicts here: only tasks and results are applied)."""
    db = tmp_path / "late.db"
    s = stored_run(db, "late", "implicit", trials=4)
    model = RunModel("late", s)
    envelopes = [Envelope.model_validate_json(text) for _, text in stored_envelopes(db, "late")]
    messages = [e for e in envelopes if e.kind in (Kind.TASK, Kind.RESULT)]
    for env in sorted(messages, key=lambda e: (e.trial, e.sender == topics.RUNNER)):
        model.apply(env)
    stored = {r["trial"]: r["outcome"] for r in trial_rows(db, "late")}
    assert {t: v.outcome for t, v in model.trials.items()} == stored
    assert not any(v.authoritative for v in model.trials.values())


def test_model_learns_topology_without_scenario(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    stored_run(db, "t-explicit", "explicit", trials=3)
    model = RunModel("t-explicit")  # attached with no scenario: runner events decide
    for _, text in stored_envelopes(db, "t-explicit"):
        model.apply(Envelope.model_validate_json(text))
    assert set(model.agents) == {"researcher", "writer"}
    assert set(model.edges) == {("researcher", "writer")}
    assert model.done == 3 and sum(model.outcomes.values()) == 3


def test_model_ignores_other_runs() -> None:
    model = RunModel("mine")
    env = Envelope(run_id="other", trial=0, seq=0, sender="runner", recipient="a",
                   kind="task", trace_id="x")  # fmt: skip
    model.apply(env)
    assert model.events == 0 and not model.agents


# -- the layout -----------------------------------------------------------------------------


def test_layout_layers_and_no_overlap() -> None:
    nodes = ["a", "b", "c", "d"]
    edges = [("a", "c"), ("b", "c"), ("c", "d"), ("a", "d")]
    assert layers(nodes, edges) == {"a": 0, "b": 0, "c": 1, "d": 2}
    lay = layout(nodes, edges)
    assert set(lay.boxes) == set(nodes)
    cells = [(x, y) for b in lay.boxes.values() for x in range(b.x, b.x + b.w)
             for y in range(b.y, b.y + b.h)]  # fmt: skip
    assert len(cells) == len(set(cells))
    assert all(b.x + b.w <= lay.width and b.y + b.h <= lay.height for b in lay.boxes.values())


def test_layout_survives_a_cycle() -> None:
    lay = layout(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "b")])
    assert len(lay.boxes) == 3


# -- the app ---------------------------------------------------------------------------------


async def test_warnings_while_the_app_runs_are_toasts_not_text_on_its_screen(
    tmp_path: Path,
) -> None:
    """A warning the run logs (a python agent's failing code, a lost agent), from the
    app's thread or another, is the app's notification while it draws; the handlers it
    set aside are given back when it ends."""
    before = logging.getLogger().handlers[:]
    app = ErrorflowApp(live_session(tmp_path / "n.db", "explicit", trials=1))
    said: list[tuple[str, str]] = []
    app.notify = lambda message, **kw: said.append((message, kw["severity"]))  # type: ignore[method-assign]
    log = logging.getLogger("errorflow.test")
    async with app.run_test(size=(80, 24)) as pilot:
        assert logging.getLogger().handlers == [app.log_toasts]
        log.warning("agent clerk: its code failed: RuntimeError: boom")
        await asyncio.to_thread(log.error, "agent writer was lost")
        await pilot.pause()
    assert ("agent clerk: its code failed: RuntimeError: boom", "warning") in said
    assert ("agent writer was lost", "error") in said
    assert logging.getLogger().handlers == before


async def test_graph_has_one_node_per_agent(tmp_path: Path) -> None:
    app = ErrorflowApp(live_session(tmp_path / "g.db", "explicit", trials=2))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.channel.model.ended)
        graph = app.query_one(GraphView)
        s = app.session.scenario
        assert s is not None
        assert graph.node_count == len(s.agents) == 2
        drawn = text_of(graph)
        assert all(drawn.count(name) == 1 for name in s.agents)


@pytest.mark.parametrize(
    ("propagation", "expected"),
    [("implicit", AgentState.CONTAMINATED), ("explicit", AgentState.CONTAINED)],
)
async def test_writer_colour_follows_propagation(
    tmp_path: Path, propagation: str, expected: AgentState
) -> None:
    app = ErrorflowApp(live_session(tmp_path / "w.db", propagation))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.channel.model.ended and not app.channel.pending)
        writer = app.channel.model.agents["writer"]
        # Over the run: explicit is ~85-94 % contained, so assert on the majority.
        assert writer.majority is expected
        if propagation == "implicit":
            assert writer.state is AgentState.CONTAMINATED  # every trial is
        assert app.channel.model.agents["researcher"].majority is expected


async def test_p_flips_propagation_and_reruns_same_seeds(tmp_path: Path) -> None:
    app = ErrorflowApp(live_session(tmp_path / "p.db", "explicit", trials=4))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.channel.model.ended)
        first = app.channel.model
        await pilot.press("p")
        second = app.channel.model
        assert second is not first and second.run_id != first.run_id
        assert second.propagation == "implicit"
        assert second.scenario is not None and first.scenario is not None
        assert second.scenario.seed == first.scenario.seed
        await wait_until(pilot, lambda: second.ended)
        assert second.outcomes[Outcome.CONTAMINATED] == 4
        await pilot.press("p")
        assert app.channel.model.propagation == "explicit"


async def test_compare_shows_both_arms(tmp_path: Path) -> None:
    app = ErrorflowApp(live_session(tmp_path / "c.db", "explicit", trials=6))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.channel.model.ended)
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.channels["explicit"] is app.channel  # the current run is one arm
        await wait_until(pilot, lambda: all(ch.model.done == 6 for ch in screen.channels.values()))
        await pilot.pause(0.2)
        panels = {p.propagation for p in screen.query(ArmPanel)}
        assert panels == {"explicit", "implicit"}
        assert screen.channels["implicit"].model.outcomes[Outcome.CONTAMINATED] == 6
        paired = text_of(screen.query_one("#paired"))
        assert "6 trials finished in both arms" in paired
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)


async def test_replay_reproduces_final_tallies(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    await asyncio.to_thread(stored_run, db, "r-explicit", "explicit")
    stored = [r["outcome"] for r in trial_rows(db, "r-explicit")]
    app = ErrorflowApp(replay_session(db, "r-exp"))  # a unique prefix is enough
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.channel.model.ended and not app.channel.pending)
        model = app.channel.model
        assert model.run_id == "r-explicit"
        assert {o.value: n for o, n in model.outcomes.items() if n} == {
            o: stored.count(o) for o in set(stored)
        }
        assert model.done == 20


async def test_pause_and_step(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    await asyncio.to_thread(stored_run, db, "s-explicit", "explicit", 2)
    rows = stored_envelopes(db, "s-explicit")
    gate = asyncio.Event()

    @dataclass
    class Gated:
        scenario: Scenario
        run_id: str = "s-explicit"

        async def run(self, sink: Sink) -> None:
            await gate.wait()
            for _, text in rows:
                sink(Envelope.model_validate_json(text))

    session = replay_session(db, "s-explicit")
    session.first = lambda: Gated(contamination(trials=2))  # type: ignore[method-assign]
    app = ErrorflowApp(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")
        assert app.paused
        gate.set()
        await wait_until(pilot, lambda: app.channel.pending == len(rows))
        # the queued count stays true while paused
        await wait_until(pilot, lambda: f"{len(rows)} queued" in text_of(app.header))
        await pilot.press("s")  # one hop: the first task, with the events around it
        model = app.channel.model
        assert len(model.feed) + len(app.feed.items) == 1
        assert 1 < model.events < len(rows) and app.channel.pending == len(rows) - model.events
        await wait_until(pilot, lambda: f"{app.channel.pending} queued" in text_of(app.header))
        await pilot.press("space")
        await wait_until(pilot, lambda: app.channel.model.ended)
        assert app.channel.model.events == len(rows)


async def test_enter_shows_envelope_and_provenance(tmp_path: Path) -> None:
    app = ErrorflowApp(live_session(tmp_path / "d.db", "implicit", trials=1))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.channel.model.ended)
        await pilot.pause(0.1)
        feed = app.query_one(FeedTable)
        feed.cursor = feed.row_count - 1  # the writer's final report
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        shown = text_of(app.screen.query_one(Static))
        assert "writer → runner" in shown and "researcher → writer" in shown
        assert "runner → researcher" in shown  # provenance back to the task
        assert '"derived_from"' in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)


async def test_help_lists_the_keys(tmp_path: Path) -> None:
    app = ErrorflowApp(live_session(tmp_path / "h.db", "explicit", trials=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        text = text_of(app.screen.query_one(Static))
        assert all(k in text for k in ("flip propagation", "compare", "pause", "quit"))
        await pilot.press("escape")


# -- the commands ---------------------------------------------------------------------------


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(scenario=None, attach=None, replay=None, speed=1.0,
                                   db="x.db", broker=None, trials=None, seed=None,
                                   propagation=None, port=8000, set=None, no_faults=False,
                                   cell=None)  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def test_commands_reject_bad_combinations(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="--broker"):
        build_session(_args(attach="r1"))
    with pytest.raises(BadInput, match="SCENARIO"):
        build_session(_args())
    with pytest.raises(BadInput, match="not both"):
        build_session(_args(attach="a", replay="b"))
    with pytest.raises(FileNotFoundError):
        build_session(_args(replay="nope", db=str(tmp_path / "missing.db")))
    for given in ({"trials": 3}, {"no_faults": True}, {"set": ["seed=2"]}):
        with pytest.raises(BadInput, match="takes no option that changes a scenario"):
            build_session(_args(replay="r1", **given))
        with pytest.raises(BadInput, match="takes no option that changes a scenario"):
            build_session(_args(attach="r1", broker="mqtt://127.0.0.1:1", **given))


def test_live_session_applies_options() -> None:
    session = build_session(_args(scenario="contamination", trials=3, propagation="implicit"))
    assert session.mode == "live" and session.scenario is not None
    assert session.scenario.trials == 3 and session.scenario.propagation == "implicit"


def test_serve_runs_the_tui_command() -> None:
    command = serve_command(_args(scenario="contamination", trials=5))
    assert "-m errorflow tui contamination" in command and "--trials 5" in command
