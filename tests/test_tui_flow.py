"""Flow on the graph: what a node and an arrow show against the tallies, drawn and in
the model (errorflow.tui.drawing.flow), with `errorflow tui contamination` run under Pilot."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from errorflow.bus.transport import InProcessBus
from errorflow.cli.commands.tui import build_session
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.scenario.loader import load
from errorflow.scoring.score import Label, Outcome
from errorflow.tui.app import ErrorflowApp
from errorflow.tui.drawing.flow import AgentView, EdgeView
from errorflow.tui.sources import BusHolder
from errorflow.tui.state import RunModel
from tests.conftest import scenario
from tests.test_tui import settled, wait_until

COUNT = re.compile(r"([✓◐✗])(\d+)")
GLYPH = {Label.CLEAN: "✓", Label.CONTAINED: "◐", Label.CONTAMINATED: "✗"}


def shown_counts(text: str) -> dict[str, int]:
    return {glyph: int(n) for glyph, n in COUNT.findall(text)}


def node_text(app: ErrorflowApp, name: str) -> str:
    """What the graph draws inside an agent's box."""
    lay = app.graph.layout_
    assert lay is not None
    box = lay.boxes[name]
    lines = app.graph.content.plain.split("\n")  # type: ignore[union-attr]
    return " ".join(lines[y][box.x + 1 : box.right - 1] for y in range(box.y + 1, box.y + box.h))


def edge_text(app: ErrorflowApp, src: str, dst: str) -> str:
    lay = app.graph.layout_
    assert lay is not None
    route = lay.routes[(src, dst)]
    assert route.label is not None
    x, y = route.label
    line = app.graph.content.plain.split("\n")[y]  # type: ignore[union-attr]
    return line[x : x + lay.fit.label_w]


@pytest.mark.parametrize("propagation", ["implicit", "explicit"])
async def test_writer_and_its_arrow_show_the_tallies(tmp_path: Path, propagation: str) -> None:
    args = argparse.Namespace(scenario="contamination", attach=None, replay=None, speed=0.0,
                              db=str(tmp_path / "f.db"), broker=None, trials=None, seed=None,
                              propagation=propagation, set=None, cell=None)  # fmt: skip
    session = build_session(args)
    session.holder = BusHolder(bus=InProcessBus())
    app = ErrorflowApp(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: settled(app))
        model = app.channel.model
        tallies = {Label.CLEAN: model.outcomes[Outcome.SUCCESS],
                   Label.CONTAINED: model.outcomes[Outcome.CONTAINED],
                   Label.CONTAMINATED: model.outcomes[Outcome.CONTAMINATED]}  # fmt: skip
        assert sum(tallies.values()) == model.done == 20
        writer = shown_counts(node_text(app, "writer"))
        arrow = shown_counts(edge_text(app, "researcher", "writer"))
        drawn_total = int(edge_text(app, "researcher", "writer").split()[0])
        assert drawn_total == model.edges[("researcher", "writer")].messages == 20
        assert {lb: writer[GLYPH[lb]] for lb in Label} == tallies  # the node is the tallies
        if propagation == "implicit":  # contamination travels the arrow into the writer
            assert tallies[Label.CONTAMINATED] == 20
            assert arrow[GLYPH[Label.CONTAMINATED]] == tallies[Label.CONTAMINATED]
            assert arrow[GLYPH[Label.CONTAINED]] == 0
        else:  # the researcher says it failed on every message: contained on the arrow
            assert tallies[Label.CONTAINED] > tallies[Label.CONTAMINATED]
            assert arrow[GLYPH[Label.CONTAINED]] == 20 and arrow[GLYPH[Label.CONTAMINATED]] == 0
        # the failure starts at the researcher's tool, every trial
        assert model.agents["researcher"].origins == 20
        assert "!20" in node_text(app, "researcher")  # on its bottom border


def test_counts_move_when_a_label_is_corrected() -> None:
    agent, edge = AgentView("w"), EdgeView("w", "x")
    agent.sent(0, "m1")
    edge.crossed("m1", 3, 0, failure=True)
    agent.relabel(0, "m1", None, Label.CONTAMINATED)
    edge.relabel("m1", None, Label.CONTAMINATED)
    agent.relabel(0, "m1", Label.CONTAMINATED, Label.CONTAINED)  # the runner's verdict
    edge.relabel("m1", Label.CONTAMINATED, Label.CONTAINED)
    assert agent.counts[Label.CONTAMINATED] == 0 and agent.counts[Label.CONTAINED] == 1
    assert edge.labels[Label.CONTAINED] == 1 and edge.failures == 1 and edge.batch == 3
    agent.sent(0, "m2")  # a revision: the trial now counts its last message
    agent.relabel(0, "m2", None, Label.CLEAN)
    agent.relabel(0, "m1", Label.CONTAINED, Label.CONTAMINATED)  # late news of the old one
    assert agent.counts == {Label.CLEAN: 1, Label.CONTAINED: 0, Label.CONTAMINATED: 0}


def test_send_back_and_waits_for_edges_come_from_the_scenario() -> None:
    s = scenario("topologies")
    model = RunModel("r", s)
    assert ("researcher", "writer") in model.edges
    twelve = load(Path(__file__).parent / "tui_scenarios" / "twelve.yaml")
    model = RunModel("r", twelve)
    assert ("papers", "finance_merge") in model.edges  # declared by finance_merge's waits_for
    assert model.edges[("reviewer", "writer")].kind == "returns"
    sent_back = Envelope(run_id="r", trial=0, seq=0, sender="reviewer", recipient="writer",
                         kind=Kind.TASK, trace_id="t")  # fmt: skip
    model.apply(sent_back)
    assert model.edges[("reviewer", "writer")].messages == 1
