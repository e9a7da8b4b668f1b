"""The comparison view: explicit and implicit propagation side by side on the same trials
(same scenario, seed and trial numbers), with the paired difference of their rates.

Each arm is a run model the app already has (the current run, or the one before `p`)
or gets: a stored run of the other arm when replaying, else a fresh run. Trial i of
one arm faces trial i of the other (the same seeded streams), so the difference is
paired: `errorflow.stats.paired_difference` over the trials finished in both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from errorflow.core.display import for_terminal, signed_pct
from errorflow.scoring.score import Label, Outcome
from errorflow.scoring.stats import paired_difference
from errorflow.tui.channel import Channel
from errorflow.tui.palette import (
    LABEL_STATE,
    OUTCOME_GLYPH,
    OUTCOME_STYLE,
    STATE_GLYPH,
)
from errorflow.tui.palette import STATE_STYLE as _STATE_STYLE
from errorflow.tui.session import SessionError
from errorflow.tui.state import RunModel
from errorflow.tui.tallies import RateSparkline, progress_line, tally_table

if TYPE_CHECKING:
    from errorflow.tui.app import ErrorflowApp

ARMS = ("explicit", "implicit")
STRIP_ROWS = 3


def trial_strip(model: RunModel, width: int) -> Text:
    """One glyph per trial, in trial order, so the two arms line up trial by trial."""
    total = model.total or (max(model.trials, default=-1) + 1)
    out = Text(no_wrap=False)
    shown = min(total, max(1, width) * STRIP_ROWS)
    for t in range(shown):
        view = model.trials.get(t)
        if view is None or view.outcome is None:
            out.append("·", "dim")
        else:
            out.append(OUTCOME_GLYPH[view.outcome], OUTCOME_STYLE[view.outcome])
    if shown < total:
        out.append(f" +{total - shown}", "dim")
    return out


def agent_lines(model: RunModel) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True, overflow="ellipsis", max_width=14)
    for _ in Label:
        table.add_column(justify="right", no_wrap=True)
    for agent in model.agents.values():
        cells = [
            Text(f"{STATE_GLYPH[LABEL_STATE[lb]]}{agent.counts[lb]}",
                 _STATE_STYLE[LABEL_STATE[lb]] if agent.counts[lb] else "dim")
            for lb in Label
        ]  # fmt: skip
        table.add_row(Text(for_terminal(agent.name), "bold"), *cells)
    return table


def paired_table(explicit: RunModel, implicit: RunModel) -> Table:
    table = Table(box=None, padding=(0, 1), expand=True, header_style="bold dim")
    table.add_column("outcome", no_wrap=True)
    table.add_column("expl.", justify="right", no_wrap=True)
    table.add_column("impl.", justify="right", no_wrap=True)
    table.add_column("diff (95% CI)", justify="right", no_wrap=True)
    table.add_column("only e/i", justify="right", no_wrap=True)
    for outcome in (Outcome.SUCCESS, Outcome.CONTAINED, Outcome.CONTAMINATED):
        a, b = explicit.outcome_vector(outcome), implicit.outcome_vector(outcome)
        both = sorted(set(a) & set(b))
        if not both:
            table.add_row(Text(outcome.value, OUTCOME_STYLE[outcome]), "–", "–", "–", "")
            continue
        d = paired_difference([a[t] for t in both], [b[t] for t in both])
        rate_a = sum(a[t] for t in both) / len(both)
        rate_b = sum(b[t] for t in both) / len(both)
        table.add_row(
            Text(outcome.value, OUTCOME_STYLE[outcome]),
            f"{rate_a:.0%}",
            f"{rate_b:.0%}",
            f"{_pp(d['diff'])} pp ({_pp(d['low'])}…{_pp(d['high'])})",
            f"{d['only_a']:.0f}/{d['only_b']:.0f}",
        )
    return table


def paired_count(explicit: RunModel, implicit: RunModel) -> int:
    return len(set(explicit.outcome_vector(Outcome.SUCCESS))
               & set(implicit.outcome_vector(Outcome.SUCCESS)))  # fmt: skip


class ArmPanel(Vertical):
    DEFAULT_CSS = """
    ArmPanel { width: 1fr; height: auto; border: round $primary 50%; padding: 0 1; }
    ArmPanel > Static { height: auto; }
    ArmPanel > Horizontal { height: 1; }
    ArmPanel .label { width: auto; color: $text-muted; }
    """

    def __init__(self, propagation: str) -> None:
        super().__init__(id=f"arm-{propagation}")
        self.propagation = propagation
        self.border_title = propagation
        self.body = Static(classes="body")
        self.spark = RateSparkline()

    def compose(self) -> ComposeResult:
        yield self.body
        with Horizontal():
            yield Static("contam. ", classes="label")
            yield self.spark

    def show(self, model: RunModel, error: str | None) -> None:
        width = max(1, self.content_region.width)
        parts: list[Text | Table] = [progress_line(model), tally_table(model)]
        parts += [trial_strip(model, width), agent_lines(model)]
        if error:
            parts.append(Text(for_terminal(error), "red"))
        self.body.update(Group(*parts))
        self.spark.set_values(model.contamination_history)


class CompareScreen(Screen[None]):
    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen > #compare-title { height: 1; background: $panel; padding: 0 1; }
    CompareScreen > #arms { height: auto; }
    CompareScreen > #paired {
        height: auto; border: round $accent 60%; padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,c", "back", "back"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, arms: dict[str, Channel], title: str) -> None:
        super().__init__(id="compare")  # the app shows a run at its pace unless this is up
        self.channels = arms
        self.title_text = title

    @classmethod
    def for_app(cls, app: ErrorflowApp) -> CompareScreen:
        model = app.channel.model
        if model.scenario is None:
            raise SessionError("comparison needs the scenario (pass SCENARIO with --attach)")
        arms: dict[str, Channel] = {}
        for propagation in ARMS:
            key = (model.scenario.model_dump_json(exclude={"propagation"}), propagation)
            channel = app.arms.get(key)
            if channel is None or channel.error:
                channel = app.start_arm(app.session.arm(propagation))
            arms[propagation] = channel
        s = model.scenario
        title = f"compare  {s.name}  seed {s.seed}  {s.trials} trials  same seeds, both arms"
        return cls(arms, title)

    def compose(self) -> ComposeResult:
        yield Static(Text(for_terminal(self.title_text), "bold"), id="compare-title")
        with Horizontal(id="arms"):
            for propagation in ARMS:
                yield ArmPanel(propagation)
        paired = Static(id="paired")
        paired.border_title = "paired difference: explicit − implicit"
        yield paired
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(0.1, self._refresh)
        self.call_after_refresh(self._refresh)

    def _refresh(self) -> None:
        for propagation, channel in self.channels.items():
            self.query_one(f"#arm-{propagation}", ArmPanel).show(channel.model, channel.error)
        explicit, implicit = (self.channels[a].model for a in ARMS)
        n = paired_count(explicit, implicit)
        note = Text(f"{n} trials finished in both arms", "dim")
        self.query_one("#paired", Static).update(Group(paired_table(explicit, implicit), note))

    def action_back(self) -> None:
        self.dismiss(None)


def _pp(fraction: float) -> str:
    """Percentage points, signed (`-0` never)."""
    return signed_pct(fraction).removesuffix("%")
