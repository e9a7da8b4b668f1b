"""The errorflow TUI: a live picture of one run, fed by a source through a channel.

Sources append envelopes to the current channel; a timer (`TICK_S`) drains it into
the run model in one batch and refreshes every view once. Pausing stops the draining
(the run goes on, envelopes queue); `s` applies one queued envelope at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, ScrollableContainer, VerticalScroll
from textual.widgets import Footer, Static

from errorflow.tui.agent_table import AgentTable
from errorflow.tui.channel import Channel
from errorflow.tui.detail import DetailScreen, detail
from errorflow.tui.feed import FeedTable
from errorflow.tui.graph import PULSE_BATCHES, GraphView
from errorflow.tui.header import RunHeader
from errorflow.tui.help import HelpScreen
from errorflow.tui.session import Session, SessionError
from errorflow.tui.sources import Source
from errorflow.tui.state import RunModel
from errorflow.tui.tallies import Tallies

TICK_S = 0.05
SIDE_DETAIL_S = 0.5

MAIN_ACTIONS = frozenset({"flip", "compare", "pause", "step", "rerun", "help"})

#: Called after the refresh that shows a batch: (arrival times, time rendered).
LatencyProbe = Callable[[list[float], float], None]


class ErrorflowApp(App[int]):
    TITLE = "errorflow"
    ENABLE_COMMAND_PALETTE = False
    # From 110 columns the tallies show intervals; from 140 the highlighted message
    # shows beside the feed.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-medium"), (140, "-wide")]  # noqa: RUF012
    # Fixed shares of the height (vh) so the screen itself never scrolls: the graph and
    # the agent table scroll inside their panels, the feed takes what is left.
    CSS = """
    Screen { layout: vertical; overflow: hidden hidden; }
    #band { height: auto; max-height: 45vh; }
    #graph-panel {
        width: 1fr; height: auto; min-height: 7; max-height: 45vh;
        border: round $primary 50%; align: center middle; scrollbar-size: 1 1;
    }
    #tallies {
        width: 27; height: 100%; min-height: 7; border: round $primary 50%; padding: 0 1;
    }
    Screen.-medium #tallies, Screen.-wide #tallies { width: 36; }
    #agents-panel {
        height: auto; max-height: 25vh; border: round $primary 50%; scrollbar-size: 1 1;
    }
    #lower { height: 1fr; min-height: 5; }
    #feed { border: round $primary 50%; }
    #side-detail {
        display: none; width: 2fr; border: round $primary 50%; padding: 0 1;
    }
    Screen.-wide #side-detail { display: block; }
    Screen.-wide #feed { width: 3fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "flip", "flip"),
        Binding("c", "compare", "compare"),
        Binding("space", "pause", "pause"),
        Binding("s", "step", "step"),
        Binding("r", "rerun", "rerun"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self, session: Session, *, tick_s: float = TICK_S, probe: LatencyProbe | None = None
    ) -> None:
        super().__init__()
        self.session = session
        self.tick_s = tick_s
        self.probe = probe
        self.paused = False
        self.note = ""
        self.channel = Channel(RunModel("(none)"))
        #: Channels by (scenario without propagation, propagation): the arms the
        #: comparison can reuse, whether this screen or the comparison started them.
        self.arms: dict[tuple[str, str], Channel] = {}
        self.tick = 0
        self._side_pending: str | None = None
        self._side_shown = 0.0
        self._last_arrival = -PULSE_BATCHES
        self.runs_started = 0

    # -- layout ------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        with Horizontal(id="band"):
            with ScrollableContainer(id="graph-panel", can_focus=False) as graph_panel:
                graph_panel.border_title = "agents graph"
                yield GraphView(id="graph")
            tallies = Tallies(id="tallies")
            tallies.border_title = "tallies"
            yield tallies
        with VerticalScroll(id="agents-panel", can_focus=False) as agents_panel:
            agents_panel.border_title = "per agent"
            yield AgentTable(id="agents")
        with Horizontal(id="lower"):
            feed = FeedTable(id="feed")
            feed.border_title = "messages (enter: details)"
            yield feed
            with VerticalScroll(id="side-detail", can_focus=False) as side:
                side.border_title = "message"
                yield Static(id="side-detail-body")
        yield Footer()

    def on_mount(self) -> None:
        # Held, not queried per tick: over a pushed screen `query_one` looks there.
        self.header = self.query_one(RunHeader)
        self.graph = self.query_one(GraphView)
        self.tallies = self.query_one(Tallies)
        self.agent_table = self.query_one(AgentTable)
        self.feed = self.query_one(FeedTable)
        self.side_detail = self.query_one("#side-detail-body", Static)
        self.feed.focus()
        self.set_interval(self.tick_s, self._tick)
        self._start(self.session.first())

    async def on_unmount(self) -> None:
        await self.session.holder.close()

    # -- runs --------------------------------------------------------------------------
    def _start(self, source: Source) -> None:
        total = source.scenario.trials if source.scenario else None
        channel = Channel(RunModel(source.run_id, source.scenario, trials=total))
        old = self.channel
        if not old.finished:
            self._forget(old)
        self.channel = channel
        self.paused, self.note = False, ""
        self.runs_started += 1
        self._remember(channel)
        self.feed.reset()
        self.side_detail.update("")
        self.run_worker(self._feed(source, channel), group="main", exclusive=True)
        self._refresh_views()

    async def _feed(self, source: Source, channel: Channel) -> None:
        try:
            await source.run(channel.sink)
        except Exception as exc:  # shown, not raised: the app stays usable
            channel.error = f"{type(exc).__name__}: {exc}"
            self.notify(channel.error, title="source failed", severity="error", timeout=10)
        else:
            channel.finished = True

    def start_arm(self, source: Source) -> Channel:
        """A side channel (the comparison's other arm), drained like the main one."""
        total = source.scenario.trials if source.scenario else None
        channel = Channel(RunModel(source.run_id, source.scenario, trials=total))
        self._remember(channel)
        self.run_worker(self._feed(source, channel), group=f"arm-{channel.model.propagation}",
                        exclusive=True)  # fmt: skip
        return channel

    def arm_key(self, model: RunModel) -> tuple[str, str] | None:
        if model.scenario is None:
            return None
        return (model.scenario.model_dump_json(exclude={"propagation"}), model.propagation)

    def _remember(self, channel: Channel) -> None:
        key = self.arm_key(channel.model)
        if key is not None:
            self.arms[key] = channel

    def _forget(self, channel: Channel) -> None:
        key = self.arm_key(channel.model)
        if key is not None and self.arms.get(key) is channel:
            del self.arms[key]

    # -- the tick ------------------------------------------------------------------------
    def _tick(self) -> None:
        self.tick += 1
        for channel in list(self.arms.values()):
            if channel is not self.channel:
                channel.drain(self.tick)
        arrivals = [] if self.paused else self.channel.drain(self.tick)
        if self._side_pending and time.monotonic() - self._side_shown >= SIDE_DETAIL_S:
            self._update_side_detail()
        if arrivals:
            self._last_arrival = self.tick
        # One more refresh after the pulse's last tick, so the `●` goes away.
        if arrivals or self.tick - self._last_arrival <= PULSE_BATCHES:
            self._refresh_views()
        if arrivals and self.probe is not None:
            probe = self.probe
            self.call_after_refresh(lambda: probe(arrivals, time.perf_counter()))

    def _refresh_views(self) -> None:
        model = self.channel.model
        note = self.note or (f"error: {self.channel.error}" if self.channel.error else "")
        self.header.show(
            model, self._mode(), paused=self.paused, pending=self.channel.pending, note=note
        )
        self.graph.show(model, self.tick)
        self.tallies.show(model)
        self.agent_table.show(model)
        self.feed.show(model)

    def _mode(self) -> str:
        s = self.session
        if s.mode == "replay":
            return f"replay ×{s.speed:g}" if s.speed > 0 else "replay"
        if s.mode == "attach" and s.run_key is None:
            return "attach (unverified: no run key)"  # forged messages would show too
        return s.mode

    # -- feed selection ------------------------------------------------------------------
    def on_feed_table_selected(self, event: FeedTable.Selected) -> None:
        self.push_screen(DetailScreen(self.channel.model, event.message_id))

    def on_feed_table_highlighted(self, event: FeedTable.Highlighted) -> None:
        # The highlight bubbles up from the feed through the screen's queue to ours, so it
        # can arrive after the app has closed its screens (a replay's last batch is shown
        # in the tick the app is quit in): then there is no main screen to show it on.
        main = self.screen_stack[0] if self.screen_stack else None
        if main is None or not main.has_class("-wide"):
            return  # only wide screens show it
        self._side_pending = event.message_id
        if not self.feed.following:
            self._update_side_detail()  # the user moved the cursor: show it now

    def _update_side_detail(self) -> None:
        # While following a busy feed this runs at most every SIDE_DETAIL_S: a
        # highlighted JSON envelope per tick would cost more than the rest of the tick.
        if self._side_pending is not None:
            self.side_detail.update(detail(self.channel.model, self._side_pending))
            self._side_pending, self._side_shown = None, time.monotonic()

    # -- actions -------------------------------------------------------------------------
    def _try(self, make: Callable[[], Source]) -> None:
        try:
            source = make()
        except SessionError as exc:
            self.notify(str(exc), severity="warning")
            return
        self._start(source)

    def action_flip(self) -> None:
        self._try(self.session.flip)

    def action_rerun(self) -> None:
        self._try(self.session.rerun)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._refresh_views()

    def action_step(self) -> None:
        if not self.paused:
            self.notify("step works while paused (space)", severity="information")
            return
        if self.channel.step(self.tick):
            self._last_arrival = self.tick
        self._refresh_views()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The run's keys belong to the main screen; over the comparison or a dialog they
        # would act on a run the user cannot see.
        return not (action in MAIN_ACTIONS and len(self.screen_stack) > 1)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_compare(self) -> None:
        from errorflow.tui.compare import CompareScreen

        try:
            screen = CompareScreen.for_app(self)
        except SessionError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.push_screen(screen)
