"""Progress on stderr: a bar per run with a live outcome tally, the rate and the time
left, and for an experiment of several runs (a sweep's cells, the arms of `--propagation
both`) where it is: `cell 3 of 9`. Without a terminal (a log, CI) the same facts go out
as plain lines: one when a run of an experiment starts, one every few seconds, and one
when its trials are done and the run is finishing (merging worker stores, writing the
summary), which can take a while on a large run."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from errorflow.cli.console import err, say
from errorflow.core.display import for_terminal
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import TrialScore

BASELINE_SUFFIX = " (fault-free baseline)"  # how experiment.run_arms labels a baseline run
LOG_EVERY_S = 5.0  # plain lines without a terminal: often enough for a CI log, not noisy


def rate_text(done: int, elapsed_s: float) -> str:
    """`41.2 trials/s`, or `75 s/trial` for slow trials (a real model's), or `-` before
    there is anything to measure."""
    if done == 0 or elapsed_s <= 0:
        return "-"
    rate = done / elapsed_s
    if rate < 0.1:
        return f"{elapsed_s / done:,.0f} s/trial"
    return f"{rate:.1f} trials/s" if rate < 100 else f"{rate:,.0f} trials/s"


def eta_text(done: int, total: int, elapsed_s: float) -> str:
    """`ETA 1:05` at the rate so far (`ETA -` before the first trial)."""
    if done == 0 or elapsed_s <= 0:
        return "ETA -"
    left = round((total - done) * elapsed_s / done)
    minutes, seconds = divmod(left, 60)
    hours, minutes = divmod(minutes, 60)
    return f"ETA {hours}:{minutes:02}:{seconds:02}" if hours else f"ETA {minutes}:{seconds:02}"


class RateColumn(ProgressColumn):
    """Trials per second since the bar started."""

    def render(self, task: Task) -> Text:
        rate = rate_text(int(task.completed), task.elapsed or 0.0)
        return Text(rate, style="progress.data.speed")


def wanted(args: argparse.Namespace) -> bool:
    return not getattr(args, "json", False) and not getattr(args, "quiet", False)


def progress_bars(args: argparse.Namespace) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=not (wanted(args) and sys.stderr.isatty()),
    )


class Bars:
    """One progress bar per run of an experiment, with a live outcome tally. `steps` are
    the labels of an experiment's runs (`unit` 1 of n, 2 of n, ...), in order. With `log`
    and no bar on screen, the same progress goes out as plain lines (`clock` and `every_s`
    decide how often)."""

    def __init__(
        self,
        progress: Progress,
        steps: Sequence[str] = (),
        unit: str = "cell",
        log: bool = False,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = LOG_EVERY_S,
    ) -> None:
        self.progress = progress
        self.steps, self.unit = list(steps), unit
        self.log = log and progress.disable  # plain lines only where no bar shows
        self.clock, self.every_s = clock, every_s
        self.bar: TaskID | None = None
        self.tally: dict[str, int] = {}
        self.description, self.total = "", 0
        self.started = self.logged = 0.0

    def describe(self, label: str) -> str:
        """`cell 3 of 9: transient/classify` for a step of the experiment, else the label."""
        step = label.removesuffix(BASELINE_SUFFIX)
        if step not in self.steps:
            return label
        return f"{self.unit} {self.steps.index(step) + 1} of {len(self.steps)}: {label}"

    def start(self, label: str, scenario: Scenario) -> None:
        self.tally = {}
        self.description = for_terminal(self.describe(label))  # a sweep's label is user text
        self.total = scenario.trials
        self.started = self.logged = self.clock()
        if self.log and self.steps:  # where an experiment is; one run's lines say it all
            say(f"{self.description}: {scenario.trials} trials")
        # The bar's description column is read as markup: `[/]` in a label is text.
        self.bar = self.progress.add_task(escape(self.description), total=self.total, tally="")

    def trial(self, score: TrialScore) -> None:
        self.tally[score.outcome.value] = self.tally.get(score.outcome.value, 0) + 1
        text = " ".join(f"{k}={v}" for k, v in sorted(self.tally.items()))
        if self.bar is not None:
            self.progress.update(self.bar, advance=1, tally=text)
        done = sum(self.tally.values())
        if done == self.total:
            self._finishing(done, text)
        elif self.log and self.clock() - self.logged >= self.every_s:
            self.logged = self.clock()
            say(self.line(done, text))

    def line(self, done: int, tally: str) -> str:
        """`arm 1 of 2: explicit: 1200/2500 trials, 41.0 trials/s, ETA 0:32, contained=3 ...`"""
        elapsed = self.clock() - self.started
        rate, eta = rate_text(done, elapsed), eta_text(done, self.total, elapsed)
        return f"{self.description}: {done}/{self.total} trials, {rate}, {eta}, {tally}"

    def _finishing(self, done: int, tally: str) -> None:
        """Every trial is in; the run still merges worker stores and writes its summary."""
        note = "finishing: merging and writing the store"
        if self.log:
            say(f"{self.line(done, tally)}; {note}")
        elif self.bar is not None:
            self.progress.update(self.bar, description=escape(f"{self.description} ({note})"))
