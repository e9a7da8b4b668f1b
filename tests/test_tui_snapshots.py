"""Snapshots of the TUI (pytest-textual-snapshot): the main screen and the comparison.

Deterministic by construction: stored runs replayed at once from a database built
here, one trial at a time (max_in_flight 1), fixed run ids and terminal sizes, and
nothing on screen that changes between runs (no timestamps, ports or generated ids).
Update after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from errorflow.tui.app import ErrorflowApp
from errorflow.tui.compare import CompareScreen
from tests.test_tui import replay_session, settled, stored_run, wait_until

SnapCompare = Callable[..., bool]


async def _scrollbar_caught_up(pilot: Pilot[int], app: ErrorflowApp) -> None:
    # Whether the feed has followed the newest rows yet depends on timing; pin it to
    # the top so the snapshot does not. The scrollbar thumb can lag one layout behind
    # rows added in a burst.
    app.feed.scroll_home(animate=False)
    await pilot.pause(0.1)
    app.feed.vertical_scrollbar.refresh()
    await pilot.pause(0.1)


def _replayed(tmp_path: Path, *arms: str) -> ErrorflowApp:
    db = tmp_path / "snap.db"
    for propagation in arms:
        stored_run(db, f"snap-{propagation}", propagation)
    return ErrorflowApp(replay_session(db, f"snap-{arms[0]}"))


def test_main_screen(snap_compare: SnapCompare, tmp_path: Path) -> None:
    app = _replayed(tmp_path, "explicit")

    async def run_before(pilot: Pilot[int]) -> None:
        await wait_until(pilot, lambda: settled(app))
        await _scrollbar_caught_up(pilot, app)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_main_screen_medium(snap_compare: SnapCompare, tmp_path: Path) -> None:
    app = _replayed(tmp_path, "implicit")

    async def run_before(pilot: Pilot[int]) -> None:
        await wait_until(pilot, lambda: settled(app))
        await _scrollbar_caught_up(pilot, app)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


def test_compare_view(snap_compare: SnapCompare, tmp_path: Path) -> None:
    app = _replayed(tmp_path, "explicit", "implicit")

    async def run_before(pilot: Pilot[int]) -> None:
        await wait_until(pilot, lambda: settled(app))
        await _scrollbar_caught_up(pilot, app)
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_until(pilot, lambda: all(ch.model.ended and not ch.pending
                                            for ch in screen.channels.values()))  # fmt: skip
        await pilot.pause(0.3)  # the screen's own refresh timer

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
