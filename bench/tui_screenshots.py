"""The README's TUI screenshots, taken from the TUI itself: docs/tui-main, tui-trial and
tui-compare, each as .svg (Textual's own export) and .png.

* main: `errorflow tui topologies --cell hierarchy/implicit --trials 20`, mid-run at
  the default pace (a fake clock is stepped through the run, so the picture catches a
  contaminated message on its way along an arrow, the trials before it counted);
* trial: that run's trial view of a contaminated trial (`t` on a message);
* compare: `errorflow tui contamination --trials 100`, `c` once both arms are in.

The PNG is the SVG rendered by headless Chromium (`chromium`, Debian's package) when
there is one, else by `rsvg-convert` (which drops the spaces that start a dimmed run
of text).

    python bench/tui_screenshots.py
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from textual.pilot import Pilot

from errorflow.bus.transport import InProcessBus
from errorflow.cli.commands.tui import build_session
from errorflow.scoring.score import Label
from errorflow.tui.app import TICK_S, ErrorflowApp
from errorflow.tui.compare import CompareScreen
from errorflow.tui.sources import BusHolder
from errorflow.tui.trial_view import TrialScreen

DOCS = Path(__file__).resolve().parent.parent / "docs"
SIZE = (120, 36)


class FakeClock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def session_args(db: Path, scenario: str, **kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(scenario=scenario, attach=None, replay=None, speed=1.0,
                                   db=str(db), broker=None, trials=None, seed=None,
                                   propagation=None, set=None, cell=None)  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def app_for(args: argparse.Namespace, clock: FakeClock | None = None) -> ErrorflowApp:
    session = build_session(args)
    session.holder = BusHolder(bus=InProcessBus())
    return ErrorflowApp(session, clock=clock or FakeClock())


async def until(pilot: Pilot[int], cond: object, timeout: float = 60) -> None:
    for _ in range(int(timeout / 0.05)):
        if cond():  # type: ignore[operator]
            return
        await pilot.pause(0.05)
    raise TimeoutError


async def main_and_trial(db: Path) -> None:
    clock = FakeClock()
    app = app_for(session_args(db, "topologies", cell="hierarchy/implicit", trials=20), clock)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.channel.finished)
        model = app.channel.model
        while model.done < 12:  # the run at its pace, on a fake clock
            clock.now += TICK_S
            app._tick()
        lit = False
        while not lit:  # to contamination half way along an arrow
            clock.now += TICK_S
            app._tick()
            lit = any(app.tick - e.batch == 4 and e.label is Label.CONTAMINATED
                      for e in model.edges.values())  # fmt: skip
        app.ticker.pause()  # hold the picture: the message half way along its arrow
        app._refresh_views()
        await pilot.pause(0.3)
        app.save_screenshot(str(DOCS / "tui-main.svg"))
        trial = next(t for t, v in model.trials.items() if v.outcome and v.depth >= 2)
        app.push_screen(TrialScreen(model, trial))
        await pilot.pause(0.3)
        app.save_screenshot(str(DOCS / "tui-trial.svg"))


async def compare(db: Path) -> None:
    app = app_for(session_args(db, "contamination", trials=100, speed=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.channel.model.ended and not app.channel.pending)
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await until(pilot, lambda: all(c.model.ended and not c.pending
                                       for c in screen.channels.values()))  # fmt: skip
        await pilot.pause(0.4)
        app.save_screenshot(str(DOCS / "tui-compare.svg"))


def to_png(svg: Path) -> None:
    png = svg.with_suffix(".png")
    box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg.read_text())
    assert box is not None
    width, height = (int(float(v) + 0.999) for v in box.groups())
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--screenshot={png}",
                        f"--window-size={width},{height}", svg.as_uri()],
                       check=True, capture_output=True)  # fmt: skip
    else:
        subprocess.run(["rsvg-convert", str(svg), "-o", str(png)], check=True)
    print(f"wrote {svg.relative_to(DOCS.parent)} and {png.name}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "shots.db"
        asyncio.run(main_and_trial(db))
        asyncio.run(compare(db))
    for name in ("tui-main", "tui-trial", "tui-compare"):
        to_png(DOCS / f"{name}.svg")


if __name__ == "__main__":
    main()
