"""Tallies: success / contained / contaminated with rates and 95 % Wilson intervals, and
a sparkline of the contamination rate after each finished trial; on a narrow screen, all
of it on one line above the graph (`tally_strip`), so the graph gets the whole width."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from errorflow.scoring.score import Outcome
from errorflow.tui.palette import (
    GREEN,
    OUTCOME_GLYPH,
    OUTCOME_STYLE,
    RED,
    YELLOW,
)
from errorflow.tui.state import TALLY_OUTCOMES, RunModel
from errorflow.tui.view import View

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int) -> Text:
    """Rates in 0..1 as bars on a fixed scale (Textual's Sparkline rescales to min..max,
    which would draw a flat 100 % like a flat 0 %); more values than columns are
    averaged into buckets."""
    out = Text(no_wrap=True, overflow="crop")
    if not values or width <= 0:
        return out
    n = len(values)
    buckets: list[Sequence[float]]
    if n <= width:
        buckets = [[v] for v in values]
    else:
        buckets = [values[i * n // width : (i + 1) * n // width] for i in range(width)]
    for bucket in buckets:
        v = min(1.0, max(0.0, sum(bucket) / len(bucket)))
        colour = RED if v >= 0.5 else (YELLOW if v > 0 else GREEN)
        out.append(BARS[min(len(BARS) - 1, int(v * len(BARS)))], colour)
    return out


class RateSparkline(Widget):
    DEFAULT_CSS = "RateSparkline { width: 1fr; height: 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values: list[float] = []

    def set_values(self, values: list[float]) -> None:
        # Only the length and the last value can change (a correction rewrites the last).
        if len(values) != len(self.values) or values[-1:] != self.values[-1:]:
            self.values = list(values)
            self.refresh()

    def render(self) -> Text:
        return sparkline(self.values, self.size.width)


#: Narrower than this, the tallies leave out the 95 % intervals.
CI_MIN_WIDTH = 30


def tally_table(model: RunModel, width: int = CI_MIN_WIDTH) -> Table:
    with_ci = width >= CI_MIN_WIDTH
    table = Table.grid(padding=(0, 1), expand=True)
    table.add_column(no_wrap=True, ratio=1)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    if with_ci:
        table.add_column(justify="right", no_wrap=True, style="dim")
    outcomes = list(TALLY_OUTCOMES)
    for fault in (Outcome.BUS_FAULT, Outcome.INFRA_FAULT):
        if model.outcomes[fault]:
            outcomes.append(fault)
    for outcome in outcomes:
        r = model.rate(outcome)
        low, high = r.ci
        cells: list[Text | str] = [
            Text(f"{OUTCOME_GLYPH[outcome]} {outcome.value}", OUTCOME_STYLE[outcome]),
            str(r.count),
            f"{r.rate:.0%}" if r.n else "–",
        ]
        if with_ci:
            cells.append(f"{low:.0%}–{high:.0%}".replace("%–", "–") if r.n else "")
        table.add_row(*cells)
    return table


def progress_line(model: RunModel) -> Text:
    total = f"/{model.total}" if model.total else ""
    state = "finished" if model.ended else ("running" if model.events else "waiting")
    return Text.assemble(("trials ", "dim"), f"{model.done}{total}", ("  " + state, "dim"))


def tally_strip(model: RunModel, width: int) -> Text:
    """`trials 12/20 running  ✓ 0 0%  ◐ 10 83%  ✗ 2 17%  ▁▃▅` in `width` columns."""
    out = progress_line(model)
    for outcome in TALLY_OUTCOMES:
        r = model.rate(outcome)
        rate = f" {r.rate:.0%}" if r.n else ""
        out.append(f"  {OUTCOME_GLYPH[outcome]} {r.count}{rate}", OUTCOME_STYLE[outcome])
    room = width - out.cell_len - 2
    if room > 3 and model.contamination_history:
        out.append("  ")
        out.append_text(sparkline(model.contamination_history, room))
    return out


class TallyStrip(View):
    DEFAULT_CSS = "TallyStrip { height: 1; padding: 0 1; }"
    _model: RunModel | None = None

    def show(self, model: RunModel) -> None:
        self._model = model
        width = self.content_region.width or 80
        key = (width, model.done, tuple(model.outcomes.items()), model.ended, bool(model.events),
               model.total, tuple(model.contamination_history[-1:]))  # fmt: skip
        self.set(tally_strip(model, width), key=key)

    def on_resize(self) -> None:
        if self._model is not None:
            self.show(self._model)


class Tallies(Vertical):
    DEFAULT_CSS = """
    Tallies { height: auto; }
    Tallies > #tally-progress { height: 1; }
    Tallies > #tally-table { height: auto; }
    Tallies > Horizontal { height: 1; }
    Tallies #spark-label { width: auto; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # Made here, not looked up: the app may show a model before they are mounted.
        self.progress = View(id="tally-progress")
        self.table = View(id="tally-table")
        self._rows = -1
        self._shown: tuple[object, ...] = ()
        self.spark = RateSparkline(id="spark")
        self._model: RunModel | None = None

    def compose(self) -> ComposeResult:
        yield self.progress
        yield self.table
        with Horizontal():
            yield Static("contam. ", id="spark-label")
            yield self.spark

    def on_resize(self) -> None:
        if self._model is not None:  # the intervals come and go with the width
            self.show(self._model)

    def show(self, model: RunModel) -> None:
        self._model = model
        width = self.content_region.width or CI_MIN_WIDTH
        key = (width, model.done, tuple(model.outcomes.items()), model.ended, bool(model.events),
               model.total)  # fmt: skip
        self.progress.set(progress_line(model), key=key)
        if key != self._shown:  # a table is costly to lay out per tick
            self._shown = key
            table = tally_table(model, width)
            self.table.set(table, layout=table.row_count != self._rows)
            self._rows = table.row_count
        self.spark.set_values(model.contamination_history)
