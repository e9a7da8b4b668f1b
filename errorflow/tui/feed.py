"""The message feed: one row per task/result message, newest last, following the tail
until the user moves the cursor up; Enter (or a second click) opens the whole envelope.
A filter (errorflow.tui.feed_filter) lists only the rows it matches, from all held.

A line-API widget (ScrollView + render_line) rather than a DataTable: only the rows on
screen are ever rendered, and adding rows costs an append, not a re-measure of every
cell. At thousands of events a second that is the difference between keeping up and
falling behind (bench/bench_tui_ingest.py). Columns have fixed widths that only grow,
so rows never jitter while the feed moves.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from errorflow.core.display import for_terminal
from errorflow.protocol.envelope import Envelope, Kind, Status
from errorflow.tui.feed_filter import FeedFilter
from errorflow.tui.palette import (
    GREEN,
    LABEL_STATE,
    RED,
    STATE_GLYPH,
    STATE_STYLE,
    YELLOW,
)
from errorflow.tui.state import AgentState, FeedItem, RunModel

#: Rows kept in the feed (older ones scroll away; the model keeps the messages).
ROW_LIMIT = 5_000
FOLLOW = -1  # cursor value: stay on the newest row

STATUS_LOOK = {
    Status.OK: ("ok", GREEN),
    Status.PARTIAL_FAILURE: ("partial", YELLOW),
    Status.FAILED: ("failed", RED),
}
DIM = Style(dim=True)
BOLD = Style(bold=True)
HEADER = Style(bold=True, dim=True)


def status_text(env: Envelope) -> Text:
    if env.kind is Kind.TASK:
        return Text("task", "dim")
    word, colour = STATUS_LOOK[env.status]
    return Text(word, colour)


def _label_cell(item: FeedItem) -> tuple[str, Style]:
    if item.env.kind is not Kind.RESULT:
        return "", DIM
    if item.label is None:
        return "—", DIM
    state: AgentState = LABEL_STATE[item.label]
    return f"{STATE_GLYPH[state]} {state.value}", STATE_STYLE[state]


def cells(item: FeedItem) -> list[tuple[str, Style]]:
    """The row of one message: (text, style) per column."""
    env = item.env
    if env.kind is Kind.TASK:
        status: tuple[str, Style] = ("task", DIM)
    else:
        word, colour = STATUS_LOOK[env.status]
        status = (word, Style(color=colour))
    codes = ", ".join(e.code.value for e in env.errors)
    return [
        (f"t{env.trial}", Style()),
        (for_terminal(f"{env.sender} → {env.recipient}"), BOLD),
        status,
        ("" if env.kind is Kind.TASK else f"{env.confidence:.2f}", Style()),
        (codes, Style(color=RED)) if codes else ("—", DIM),
        _label_cell(item),
    ]


COLUMNS = ("#", "from → to", "status", "conf", "errors", "label")
#: Widest an errors cell grows before it is cut with an ellipsis.
ERRORS_MAX = 34


class FeedTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    FeedTable { height: 1fr; }
    FeedTable > .feed--cursor { background: $primary 40%; }
    FeedTable:focus > .feed--cursor { background: $primary 70%; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"feed--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "up", show=False),
        Binding("down", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "first", "first", show=False),
        Binding("end", "follow", "follow", show=False),
        Binding("enter", "select", "details", show=False),
    ]

    class Selected(Message):
        def __init__(self, message_id: str) -> None:
            super().__init__()
            self.message_id = message_id

    class Highlighted(Message):
        def __init__(self, message_id: str) -> None:
            super().__init__()
            self.message_id = message_id

    cursor: reactive[int] = reactive(FOLLOW, always_update=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.all: deque[FeedItem] = deque(maxlen=ROW_LIMIT)
        self.items: deque[FeedItem] = self.all  # the rows listed: all, or the filter's
        self.filter = FeedFilter()
        self.widths = self._initial_widths()

    @staticmethod
    def _initial_widths() -> list[int]:
        widths = [len(c) for c in COLUMNS]
        widths[-1] = len("✗ contaminated")
        return widths

    # -- data ------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.items)

    @property
    def following(self) -> bool:
        return self.cursor == FOLLOW

    @property
    def cursor_row(self) -> int:
        return len(self.items) - 1 if self.cursor == FOLLOW else self.cursor

    def reset(self) -> None:
        self.all.clear()
        self.items = self.all if not self.filter.active else deque(maxlen=ROW_LIMIT)
        self.widths = self._initial_widths()
        self.cursor = FOLLOW
        self._resize()

    def set_filter(self, feed_filter: FeedFilter) -> None:
        """List only what `feed_filter` matches (from the messages still held)."""
        self.filter = feed_filter
        self._refilter()
        self.cursor = FOLLOW
        self.scroll_end(animate=False)
        self.refresh()

    def _refilter(self) -> None:
        if not self.filter.active:
            self.items = self.all
        else:
            self.items = deque((i for i in self.all if self.filter.matches(i)), maxlen=ROW_LIMIT)
        self._resize()

    def show(self, model: RunModel) -> None:
        new, relabelled = model.take_feed()
        if not new and not relabelled:
            return
        before = len(self.items)
        for item in new:
            self.all.append(item)
            if self.items is not self.all and self.filter.matches(item):
                self.items.append(item)
            for i, (text, _) in enumerate(cells(item)):
                limit = ERRORS_MAX if i == 4 else 10_000
                self.widths[i] = max(self.widths[i], min(len(text), limit))
        if relabelled and self.filter.by_label:
            self._refilter()  # a late label moves messages in or out
        overflow = max(0, before + len(new) - ROW_LIMIT) if self.items is self.all else 0
        if overflow and self.cursor != FOLLOW:
            self.cursor = max(0, self.cursor - overflow)  # keep the same message under it
        self._resize()
        if self.following:
            self.scroll_end(animate=False)  # after the layout: it knows the new height
            self._highlighted()
        self.refresh()

    def selected_id(self) -> str | None:
        item = self.selected()
        return item.env.id if item is not None else None

    def selected(self) -> FeedItem | None:
        row = self.cursor_row
        return self.items[row] if 0 <= row < len(self.items) else None

    def _fitted(self) -> list[int]:
        """Column widths for the current width: the errors column gives way first."""
        widths = list(self.widths)
        spare = self.size.width - (sum(widths) + 2 * len(widths))
        if spare < 0:
            widths[4] = max(len(COLUMNS[4]), widths[4] + spare)
        return widths

    def _resize(self) -> None:
        width = sum(self._fitted()) + 2 * len(self.widths)
        self.virtual_size = Size(width, len(self.items) + 1)  # + the header line

    def on_resize(self) -> None:
        self._resize()

    # -- drawing ---------------------------------------------------------------------------
    def _row_segments(self, row: list[tuple[str, Style]], base: Style) -> list[Segment]:
        segments = []
        for (text, style), width in zip(row, self._fitted(), strict=True):
            if len(text) > width:
                text = text[: width - 1] + "…"
            segments.append(Segment(" " + text.ljust(width) + " ", base + style))
        return segments

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if y == 0:  # the header stays put while the rows scroll under it
            header = [(c, HEADER) for c in COLUMNS]
            strip = Strip(self._row_segments(header, base))
            return strip.crop_extend(scroll_x, scroll_x + width, base)
        index = scroll_y + y - 1
        if index >= len(self.items):
            return Strip.blank(width, base)
        style = base
        if index == self.cursor_row:
            style = base + self.get_component_rich_style("feed--cursor")
        strip = Strip(self._row_segments(cells(self.items[index]), style))
        return strip.crop_extend(scroll_x, scroll_x + width, style)

    # -- the cursor ------------------------------------------------------------------------
    def watch_cursor(self) -> None:
        row = self.cursor_row
        if row >= 0:
            # Keep the cursor row inside the rows area (line 0 is the header).
            top, height = int(self.scroll_y), max(1, self.size.height - 1)
            if row < top:
                self.scroll_to(y=row, animate=False, immediate=True)
            elif row >= top + height:
                self.scroll_to(y=row - height + 1, animate=False, immediate=True)
        self._highlighted()
        self.refresh()

    def _highlighted(self) -> None:
        message_id = self.selected_id()
        if message_id is not None:
            self.post_message(self.Highlighted(message_id))

    def action_move(self, delta: int) -> None:
        if not self.items:
            return
        row = min(len(self.items) - 1, max(0, self.cursor_row + delta))
        self.cursor = FOLLOW if row == len(self.items) - 1 and delta > 0 else row

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(1, self.size.height - 2))

    def action_first(self) -> None:
        if self.items:
            self.cursor = 0

    def action_follow(self) -> None:
        self.cursor = FOLLOW
        self.scroll_end(animate=False)

    def action_select(self) -> None:
        message_id = self.selected_id()
        if message_id is not None:
            self.post_message(self.Selected(message_id))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y - 1
        if event.y == 0 or not 0 <= index < len(self.items):
            return
        if index == self.cursor_row:
            self.action_select()  # a second click on the same row opens it
        else:
            self.cursor = index
