"""The pace of the main screen, measured with a fake clock (no test here waits for it):
`errorflow tui contamination` shows its 20 trials in 20–40 s at ×1, and `+` twice makes
it at least 3× faster; a paced channel shows one trial at a time."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from textual.pilot import Pilot

from errorflow.bus.transport import InProcessBus
from errorflow.cli.commands.tui import build_session
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.tui.app import TICK_S, ErrorflowApp
from errorflow.tui.channel import Channel
from errorflow.tui.pace import HOP_S, Pace
from errorflow.tui.sources import BusHolder
from errorflow.tui.state import RunModel
from tests.test_tui import text_of, wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_pace_admits_one_hop_per_interval_without_drift() -> None:
    clock = FakeClock()
    pace = Pace(1.0, clock)
    admitted = 0
    for _ in range(200):  # 10 s in UI ticks
        while pace.admit():
            admitted += 1
        clock.now += TICK_S
    assert admitted == pytest.approx(10 / HOP_S, abs=1)
    pace.faster()
    pace.faster()
    assert pace.speed == 4 and pace.label == "×4"
    assert pace.interval == HOP_S / 4


def test_pace_saves_up_no_burst_after_a_dry_spell() -> None:
    clock = FakeClock()
    pace = Pace(1.0, clock)
    assert pace.admit()
    clock.now += 60  # a slow model: nothing to show for a minute
    assert pace.admit()
    assert not pace.admit()  # the next hop waits its interval, it is not owed a minute


def test_speeds_step_up_to_unpaced_and_back() -> None:
    pace = Pace(32.0)
    pace.faster()
    assert pace.speed == 64
    pace.faster()
    assert pace.speed == 0 and pace.label == "×max" and pace.admit()
    pace.faster()
    assert pace.speed == 0
    pace.slower()
    assert pace.speed == 64
    slow = Pace(0.25)
    slow.slower()
    assert slow.speed == 0.25
    with pytest.raises(ValueError):
        Pace(-1)


def env(trial: int, kind: Kind, sender: str = "a", recipient: str = "b") -> Envelope:
    return Envelope(run_id="r", trial=trial, seq=0, sender=sender, recipient=recipient,
                    kind=kind, trace_id="t")  # fmt: skip


def test_a_paced_channel_shows_one_trial_at_a_time() -> None:
    clock = FakeClock()
    channel = Channel(RunModel("r"))
    arrivals = [env(0, Kind.CONTROL, "runner", "all")]
    for kind in (Kind.TASK, Kind.RESULT):  # all trials in flight: tasks, then results
        arrivals += [env(t, kind) for t in range(3)]
    arrivals.append(env(0, Kind.CONTROL, "runner", "all"))
    for e in arrivals:
        channel.sink(e)
    shown: list[tuple[int, Kind]] = []
    pace = Pace(1.0, clock)
    original = channel.model.apply
    channel.model.apply = lambda e: (shown.append((e.trial, e.kind)), original(e))  # type: ignore[method-assign]
    while channel.pending:
        channel.drain(0, pace)
        clock.now += TICK_S
    hops = [s for s in shown if s[1] is not Kind.CONTROL]
    assert hops == [(t, k) for t in range(3) for k in (Kind.TASK, Kind.RESULT)]
    assert shown[0][1] is Kind.CONTROL and shown[-1][1] is Kind.CONTROL  # in their places


def test_step_shows_one_hop_with_its_events_and_unpaced_keeps_arrival_order() -> None:
    channel = Channel(RunModel("r"))
    for t in range(2):
        channel.sink(env(t, Kind.TASK))
    channel.sink(env(0, Kind.EVENT))  # trial 0's: it rides with trial 0's hop
    channel.sink(env(1, Kind.RESULT))
    assert channel.step() and channel.pending == 2
    shown: list[int] = []
    original = channel.model.apply
    channel.model.apply = lambda e: (shown.append(e.trial), original(e))  # type: ignore[method-assign]
    assert len(channel.drain()) == 2 and channel.pending == 0 and not channel.step()
    assert shown == [1, 1]


def _cli_session(db: Path, **kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(scenario="contamination", attach=None, replay=None,
                                   speed=1.0, db=str(db), broker=None, trials=None, seed=None,
                                   propagation=None, set=None, cell=None)  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


async def _shown_in(pilot: Pilot[int], app: ErrorflowApp, clock: FakeClock) -> float:
    """Fake seconds from the run's start until all of it is on screen."""
    await wait_until(pilot, lambda: app.channel.finished)  # the run is over in real time
    start = clock.now
    while not (app.channel.model.ended and not app.channel.pending):
        clock.now += TICK_S
        app._tick()
        assert clock.now - start < 600, "the display never caught up"
    return clock.now - start


async def test_contamination_takes_half_a_minute_and_plus_twice_is_3x_faster(
    tmp_path: Path,
) -> None:
    session = build_session(_cli_session(tmp_path / "pace.db"))  # the CLI's defaults
    session.holder = BusHolder(bus=InProcessBus())
    clock = FakeClock()
    app = ErrorflowApp(session, clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        default = await _shown_in(pilot, app, clock)
        assert app.channel.model.done == 20
        assert 20 <= default <= 40, default
        await pilot.press("plus", "plus")
        assert app.pace.speed == 4
        assert "×4" in text_of(app.header)
        await pilot.press("r")  # the same run again, at the new pace
        faster = await _shown_in(pilot, app, clock)
        assert app.channel.model.done == 20
        assert faster * 3 <= default, (default, faster)
