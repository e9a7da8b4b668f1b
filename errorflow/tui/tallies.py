"""Tallies: success / contained / contaminated with rates and 95 % Wilson intervals, and
a sparkline of the contamination rate after each finished trial."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline, Static

from errorflow.scoring import Outcome
from errorflow.tui.palette import OUTCOME_GLYPH, OUTCOME_STYLE
from errorflow.tui.state import TALLY_OUTCOMES, RunModel


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def tally_table(model: RunModel) -> Table:
    table = Table.grid(padding=(0, 1), expand=True)
    table.add_column(no_wrap=True, ratio=1)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(justify="right", no_wrap=True, style="dim")
    outcomes = list(TALLY_OUTCOMES)
    if model.outcomes[Outcome.BUS_FAULT]:
        outcomes.append(Outcome.BUS_FAULT)
    for outcome in outcomes:
        r = model.rate(outcome)
        low, high = r.ci
        table.add_row(
            Text(f"{OUTCOME_GLYPH[outcome]} {outcome.value}", OUTCOME_STYLE[outcome]),
            str(r.count),
            f"{r.rate:.0%}" if r.n else "–",
            f"{low:.0%}–{high:.0%}".replace("%–", "–") if r.n else "",
        )
    return table


def progress_line(model: RunModel) -> Text:
    total = f"/{model.total}" if model.total else ""
    state = "finished" if model.ended else ("running" if model.events else "waiting")
    return Text.assemble(("trials ", "dim"), f"{model.done}{total}", ("  " + state, "dim"))


class Tallies(Vertical):
    DEFAULT_CSS = """
    Tallies { height: auto; }
    Tallies > #tally-progress { height: 1; }
    Tallies > #tally-table { height: auto; }
    Tallies > Horizontal { height: 1; }
    Tallies #spark-label { width: auto; color: $text-muted; }
    Tallies Sparkline { width: 1fr; height: 1; }
    Tallies Sparkline > .sparkline--min-color { color: #e5c07b; }
    Tallies Sparkline > .sparkline--max-color { color: #ef5a5a; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="tally-progress")
        yield Static(id="tally-table")
        with Horizontal():
            yield Static("contam. ", id="spark-label")
            yield Sparkline([], summary_function=_mean, id="spark")

    def show(self, model: RunModel) -> None:
        self.query_one("#tally-progress", Static).update(progress_line(model))
        self.query_one("#tally-table", Static).update(tally_table(model))
        history = model.contamination_history
        # Pin the scale at 0..1: a flat 100 % line must not look like a flat 0 % one.
        self.query_one("#spark", Sparkline).data = [0.0, 1.0, *history] if history else []
