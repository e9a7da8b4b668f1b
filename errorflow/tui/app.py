"""The errorflow TUI: a live picture of one run, fed by a source through a channel.

Sources append envelopes to the current channel; a timer (`TICK_S`) drains what the
pace lets through (errorflow.tui.pace: one hop every half second at ×1, `+` / `-`)
into the run model in one batch and refreshes every view once. Pausing stops the
draining (the run goes on, envelopes queue and the header counts them); `s` applies
the next hop. The comparison shows its arms as fast as they come.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, ScrollableContainer, Vertical, VerticalScroll
from textual.widgets import Footer, Input, Static

from errorflow.core.display import for_terminal
from errorflow.tui.agent_table import AgentTable
from errorflow.tui.channel import Channel
from errorflow.tui.detail import DetailScreen, detail
from errorflow.tui.feed import FeedTable
from errorflow.tui.feed_filter import parse_filter
from errorflow.tui.graph import PULSE_TICKS, GraphView
from errorflow.tui.header import RunHeader
from errorflow.tui.help import HelpScreen
from errorflow.tui.log_toasts import LogToasts
from errorflow.tui.pace import Clock, Pace
from errorflow.tui.session import Session, SessionError
from errorflow.tui.sources import Source
from errorflow.tui.state import RunModel
from errorflow.tui.tallies import Tallies, TallyStrip
from errorflow.tui.trial_view import TrialScreen

TICK_S = 0.05
SIDE_DETAIL_S = 0.5
#: Share of the screen's height the graph may take (its panel's max-height, in vh).
GRAPH_SHARE = 0.5
#: From this height the policy panel shows without asking (`a` toggles it anyway).
TALL = 40
#: The tallies panel's width from the medium breakpoint (narrower: one line on top).
TALLIES_W = 36

MAIN_ACTIONS = frozenset({"flip", "compare", "pause", "step", "rerun", "help", "faster",
                          "slower", "trial", "filter", "agents", "zoom"})  # fmt: skip
RUN_ACTIONS = frozenset({"flip", "compare", "rerun"})  # they need the scenario

#: Called after the refresh that shows a batch: (arrival times, time rendered).
LatencyProbe = Callable[[list[float], float], None]


class ErrorflowApp(App[int]):
    TITLE = "errorflow"
    ENABLE_COMMAND_PALETTE = False
    # From 110 columns the tallies get a panel of their own and show intervals; from
    # 140 the highlighted message shows beside the feed.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-medium"), (140, "-wide")]  # noqa: RUF012
    # Fixed shares of the height (vh) so the screen itself never scrolls: the graph and
    # the policy panel scroll inside their panels, the feed takes what is left.
    CSS = f"""
    Screen {{ layout: vertical; overflow: hidden hidden; }}
    #strip {{ display: none; background: $boost; }}
    Screen.-narrow #strip {{ display: block; }}
    #band {{ height: auto; max-height: {GRAPH_SHARE * 100:g}vh; }}
    #graph-panel {{
        width: 1fr; height: auto; min-height: 5; max-height: {GRAPH_SHARE * 100:g}vh;
        border: round $primary 50%; align: center middle; scrollbar-size: 1 1;
    }}
    #tallies {{
        display: none; width: {TALLIES_W}; height: 100%; min-height: 7;
        border: round $primary 50%; padding: 0 1;
    }}
    Screen.-medium #tallies, Screen.-wide #tallies {{ display: block; }}
    Screen.-medium #graph-panel, Screen.-wide #graph-panel {{ min-height: 7; }}
    #agents-panel {{
        display: none; height: auto; max-height: 25vh; border: round $primary 50%;
        scrollbar-size: 1 1;
    }}
    #lower {{ height: 1fr; min-height: 5; }}
    #feed-box {{ width: 1fr; }}
    #feed {{ border: round $primary 50%; }}
    #filter {{ display: none; height: 3; }}
    #side-detail {{
        display: none; width: 2fr; border: round $primary 50%; padding: 0 1;
    }}
    Screen.-wide #side-detail {{ display: block; }}
    Screen.-wide #feed-box {{ width: 3fr; }}
    Screen.-zoom #lower, Screen.-zoom #agents-panel {{ display: none; }}
    Screen.-zoom #band, Screen.-zoom #graph-panel {{ height: 1fr; max-height: 100%; }}
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # The footer lists what fits 80 columns; `?` lists them all.
        Binding("space", "pause", "pause"),
        Binding("s", "step", "step"),
        Binding("plus,equals_sign", "faster", "speed", key_display="+/-"),
        Binding("minus", "slower", "slower", show=False),
        Binding("t", "trial", "trial"),
        Binding("slash", "filter", "filter", key_display="/"),
        Binding("p", "flip", "flip"),
        Binding("c", "compare", "compare"),
        Binding("r", "rerun", "rerun", show=False),
        Binding("a", "agents", "agents", show=False),
        Binding("g", "zoom", "graph", show=False),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        session: Session,
        *,
        tick_s: float = TICK_S,
        probe: LatencyProbe | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__()
        self.session = session
        self.tick_s = tick_s
        self.log_toasts = LogToasts(self)  # the run's warnings, while the app draws
        self.probe = probe
        self.pace = Pace(session.speed, clock)
        self.paused = False
        self.note = ""
        self.channel = Channel(RunModel("(none)"))
        #: Channels by (scenario without propagation, propagation): the arms the
        #: comparison can reuse, whether this screen or the comparison started them.
        self.arms: dict[tuple[str, str], Channel] = {}
        self.tick = 0
        self._side_pending: str | None = None
        self._side_shown = 0.0
        self._last_arrival = -PULSE_TICKS
        self._shown_pending = -1
        self.show_agents: bool | None = None  # None: as tall as the screen is
        self.runs_started = 0
        self._mounted = False  # a resize can come before the views are held

    # -- layout ------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield TallyStrip(id="strip")
        with Horizontal(id="band"):
            with ScrollableContainer(id="graph-panel", can_focus=False) as graph_panel:
                graph_panel.border_title = "agents graph"
                yield GraphView(id="graph")
            tallies = Tallies(id="tallies")
            tallies.border_title = "tallies"
            yield tallies
        with VerticalScroll(id="agents-panel", can_focus=False) as agents_panel:
            agents_panel.border_title = "per agent: policy decisions"
            yield AgentTable(id="agents")
        with Horizontal(id="lower"):
            with Vertical(id="feed-box"):
                yield FeedTable(id="feed")
                yield Input(placeholder="label, agent or trial (t3): enter to filter, "
                            "escape to clear", id="filter")  # fmt: skip
            with VerticalScroll(id="side-detail", can_focus=False) as side:
                side.border_title = "message"
                yield Static(id="side-detail-body")
        yield Footer()

    def on_mount(self) -> None:
        # Held, not queried per tick: over a pushed screen `query_one` looks there.
        self.header = self.query_one(RunHeader)
        self.strip = self.query_one(TallyStrip)
        self.graph = self.query_one(GraphView)
        self.graph_panel = self.query_one("#graph-panel", ScrollableContainer)
        self.tallies = self.query_one(Tallies)
        self.agents_panel = self.query_one("#agents-panel", VerticalScroll)
        self.agent_table = self.query_one(AgentTable)
        self.feed = self.query_one(FeedTable)
        self.filter_input = self.query_one("#filter", Input)
        self.side_detail = self.query_one("#side-detail-body", Static)
        self._mounted = True
        self._place_agents()
        self._feed_title()
        self.feed.focus()
        self.ticker = self.set_interval(self.tick_s, self._tick)
        self._start(self.session.first())
        self.log_toasts.install()

    async def on_unmount(self) -> None:
        self.log_toasts.remove()
        await self.session.holder.close()

    def on_resize(self, event: events.Resize) -> None:
        if not self._mounted:
            return
        self._place_agents()
        self.call_after_refresh(self._refresh_views)  # the graph fits the new room

    def _place_agents(self) -> None:
        shown = self.show_agents
        self.agents_panel.display = self.size.height >= TALL if shown is None else shown

    def graph_room(self) -> tuple[int, int]:
        """Columns and rows the graph may take without its panel scrolling."""
        width, height = self.size
        panel = self.graph_panel.region.width - 2
        narrow = width < 110
        if panel <= 0:
            panel = width - 2 - (0 if narrow else TALLIES_W)
        if self.screen_stack and self.screen_stack[0].has_class("-zoom"):
            return panel, height - 2 - (3 if narrow else 2)
        return panel, int(height * GRAPH_SHARE) - 2

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
        self.refresh_bindings()

    async def _feed(self, source: Source, channel: Channel) -> None:
        try:
            await source.run(channel.sink)
        except Exception as exc:  # shown, not raised: the app stays usable
            channel.error = for_terminal(f"{type(exc).__name__}: {exc}")
            self.notify(
                channel.error, title="source failed", severity="error", timeout=10, markup=False
            )
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
        comparing = len(self.screen_stack) > 1 and self.screen_stack[-1].id == "compare"
        pace = None if comparing else self.pace
        arrivals = [] if self.paused else self.channel.drain(self.tick, pace)
        if self._side_pending and time.monotonic() - self._side_shown >= SIDE_DETAIL_S:
            self._update_side_detail()
        if arrivals:
            self._last_arrival = self.tick
        # Until the pulse's last tick, so the light and the `●` go away.
        if arrivals or self.tick - self._last_arrival <= PULSE_TICKS:
            self._refresh_views()
        elif self.channel.pending != self._shown_pending:
            self._refresh_header()  # the queued count stays true, paused or not
        if arrivals and self.probe is not None:
            probe = self.probe
            self.call_after_refresh(lambda: probe(arrivals, time.perf_counter()))

    def _refresh_header(self) -> None:
        model = self.channel.model
        note = self.note or (f"error: {self.channel.error}" if self.channel.error else "")
        self._shown_pending = self.channel.pending
        self.header.show(model, self._mode(), paused=self.paused, pending=self._shown_pending,
                         note=note, pace=self.pace.label)  # fmt: skip

    def _refresh_views(self) -> None:
        model = self.channel.model
        self._refresh_header()
        self.strip.show(model)
        room = self.graph_room()
        self.graph.show(model, self.tick, room)
        self._follow(room)
        self.tallies.show(model)
        self.agent_table.show(model)
        self.feed.show(model)

    def _follow(self, room: tuple[int, int]) -> None:
        """A graph bigger than its panel scrolls to where the latest message goes."""
        lay = self.graph.layout_
        if lay is None or (lay.width <= room[0] and lay.height <= room[1]):
            return
        target = self.graph.travelling(self.channel.model, self.tick)
        if target is not None:
            self.graph_panel.scroll_to_region(target, animate=False, immediate=True)

    def _mode(self) -> str:
        s = self.session
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

    # -- the filter ------------------------------------------------------------------------
    def _feed_title(self) -> None:
        f = self.feed.filter
        title = "messages (enter: details, t: trial, /: filter)"
        if f.active:
            title = f"messages: {for_terminal(f.text)} ({len(self.feed.items)} shown)"
        self.feed.border_title = title

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.feed.set_filter(parse_filter(event.value))
        self._feed_title()  # the feed's title says what it is filtered by
        self.filter_input.display = False
        self.feed.focus()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.filter_input.has_focus:
            self.filter_input.value = ""
            self.filter_input.display = False
            self.feed.set_filter(parse_filter(""))
            self._feed_title()
            self.feed.focus()
            event.stop()

    # -- actions -------------------------------------------------------------------------
    def _try(self, make: Callable[[], Source]) -> None:
        try:
            source = make()
        except SessionError as exc:
            self.notify(for_terminal(str(exc)), severity="warning", markup=False)
            return
        self._start(source)

    def action_flip(self) -> None:
        self._try(self.session.flip)

    def action_rerun(self) -> None:
        self._try(self.session.rerun)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._refresh_views()
        self.refresh_bindings()  # `s` is offered only while paused

    def action_step(self) -> None:
        if self.channel.step(self.tick):
            self._last_arrival = self.tick
        self._refresh_views()

    def action_faster(self) -> None:
        self.pace.faster()
        self._refresh_header()

    def action_slower(self) -> None:
        self.pace.slower()
        self._refresh_header()

    def action_trial(self) -> None:
        item = self.feed.selected()
        if item is None:
            self.notify("no message to open the trial of yet", severity="information")
            return
        self.push_screen(TrialScreen(self.channel.model, item.env.trial))

    def action_filter(self) -> None:
        self.filter_input.display = True
        self.filter_input.focus()

    def action_agents(self) -> None:
        self.show_agents = not self.agents_panel.display
        self._place_agents()

    def action_zoom(self) -> None:
        self.screen.toggle_class("-zoom")
        self.call_after_refresh(self._refresh_views)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The run's keys belong to the main screen; over the comparison or a dialog they
        # would act on a run the user cannot see.
        if action in MAIN_ACTIONS and len(self.screen_stack) > 1:
            return False
        if action == "step":
            return self.paused
        if action in RUN_ACTIONS:
            return self.session.can_run  # an attached run without its scenario: hidden
        return True

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
