"""Snapshots of the TUI (pytest-textual-snapshot): the main screen, the comparison, and
the graph of a 6-agent and a 12-agent system (chain with a send-back, fan-in, star) at
80×24 and 160×48, each checked for boxes over boxes and arrows not drawn.

Deterministic by construction: stored runs replayed at once from a database built
here, one trial at a time (max_in_flight 1), fixed run ids and terminal sizes, and
nothing on screen that changes between runs (no timestamps, ports or generated ids:
the message beside the feed on wide screens, which has them, is left blank; the feed
and a graph bigger than its panel, whose scroll positions follow the replay's timing, are
pinned to the top once what they followed has been checked).
Update after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.pilot import Pilot

from errorflow.bus.transport import InProcessBus
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.loader import load
from errorflow.tui.app import ErrorflowApp
from errorflow.tui.compare import CompareScreen
from tests.test_tui import replay_session, settled, stored_run, wait_until
from tests.test_tui_layout import drawn_ok, problems

SnapCompare = Callable[..., bool]
SYSTEMS = Path(__file__).parent / "tui_scenarios"


async def _scrollbar_caught_up(pilot: Pilot[int], app: ErrorflowApp) -> None:
    # Whether the feed has followed the newest rows yet depends on timing; pin it to
    # the top so the snapshot does not. The scrollbar thumb can lag one layout behind
    # rows added in a burst.
    app.feed.scroll_home(animate=False)
    await pilot.pause(0.1)
    app.feed.vertical_scrollbar.refresh()
    await pilot.pause(0.1)


async def _settled(pilot: Pilot[int], app: ErrorflowApp) -> None:
    await wait_until(pilot, lambda: settled(app))
    await _scrollbar_caught_up(pilot, app)
    app._side_pending = None  # the envelope beside the feed has ids and timestamps
    app.side_detail.update("")
    await pilot.pause(0.1)


async def _graph_followed_then_pinned(pilot: Pilot[int], app: ErrorflowApp) -> None:
    # A graph bigger than its panel has followed the messages: the box the last one went
    # to is in view. Where the panel stands besides depends on which batches the replay's
    # ticks happened to show (a loaded machine shows fewer, larger ones), so the snapshot
    # pins it to the top left.
    lay, panel = app.graph.layout_, app.graph_panel
    assert lay is not None
    last = max(app.channel.model.edges.values(), key=lambda e: e.order)
    box = lay.boxes[last.dst]
    width, height = panel.scrollable_content_region.size
    seen = Region(round(panel.scroll_x), round(panel.scroll_y), width, height)
    assert seen.contains_region(Region(box.x, box.y, box.w, box.h)), (seen, box)
    panel.scroll_home(animate=False, immediate=True)
    await pilot.pause(0.1)


def _replayed(tmp_path: Path, *arms: str) -> ErrorflowApp:
    db = tmp_path / "snap.db"
    for propagation in arms:
        stored_run(db, f"snap-{propagation}", propagation)
    return ErrorflowApp(replay_session(db, f"snap-{arms[0]}"))


def test_main_screen(snap_compare: SnapCompare, tmp_path: Path) -> None:
    app = _replayed(tmp_path, "explicit")

    async def run_before(pilot: Pilot[int]) -> None:
        await _settled(pilot, app)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_main_screen_medium(snap_compare: SnapCompare, tmp_path: Path) -> None:
    app = _replayed(tmp_path, "implicit")

    async def run_before(pilot: Pilot[int]) -> None:
        await _settled(pilot, app)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


def test_compare_view(snap_compare: SnapCompare, tmp_path: Path) -> None:
    app = _replayed(tmp_path, "explicit", "implicit")

    async def run_before(pilot: Pilot[int]) -> None:
        await _settled(pilot, app)
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_until(pilot, lambda: all(ch.model.ended and not ch.pending
                                            for ch in screen.channels.values()))  # fmt: skip
        await pilot.pause(0.3)  # the screen's own refresh timer

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def system_app(tmp_path: Path, name: str) -> ErrorflowApp:
    """A stored run of one of the test systems, replayed at once."""
    s = load(SYSTEMS / f"{name}.yaml").model_copy(update={"max_in_flight": 1})
    db = tmp_path / "systems.db"
    asyncio.run(run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db, run_id=f"snap-{name}")))
    return ErrorflowApp(replay_session(db, f"snap-{name}"))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("name", ["six", "twelve"])
def test_system_graph(
    snap_compare: SnapCompare, tmp_path: Path, name: str, size: tuple[int, int]
) -> None:
    app = system_app(tmp_path, name)

    async def run_before(pilot: Pilot[int]) -> None:
        await _settled(pilot, app)
        lay = app.graph.layout_
        assert lay is not None and set(lay.boxes) == set(app.channel.model.agents)
        assert set(lay.routes) == set(app.channel.model.edges)  # every edge has its arrow
        assert problems(lay) == [] and drawn_ok(lay) == []  # no box over another, all drawn
        if (name, size) != ("twelve", (80, 24)):  # twelve agents six deep scroll at 80x24
            width, height = app.graph_room()
            assert lay.width <= width and lay.height <= height
        else:
            await _graph_followed_then_pinned(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
