"""Progress on stderr: a bar per run with a live outcome tally, and for an experiment of
several runs (a sweep's cells, the arms of `--propagation both`) where it is: `cell 3 of
9`. Without a terminal (a log, CI) an experiment says one plain line per run instead."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from errorflow.cli.console import err, say
from errorflow.core.display import for_terminal
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import TrialScore

BASELINE_SUFFIX = " (fault-free baseline)"  # how experiment.run_arms labels a baseline run


def wanted(args: argparse.Namespace) -> bool:
    return not getattr(args, "json", False) and not getattr(args, "quiet", False)


def progress_bars(args: argparse.Namespace) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not (wanted(args) and sys.stderr.isatty()),
    )


class Bars:
    """One progress bar per run of an experiment, with a live outcome tally. `steps` are
    the labels of an experiment's runs (`unit` 1 of n, 2 of n, ...), in order."""

    def __init__(
        self, progress: Progress, steps: Sequence[str] = (), unit: str = "cell", log: bool = False
    ) -> None:
        self.progress = progress
        self.steps, self.unit = list(steps), unit
        self.log = log and progress.disable  # plain lines only where no bar shows
        self.bar: TaskID | None = None
        self.tally: dict[str, int] = {}

    def describe(self, label: str) -> str:
        """`cell 3 of 9: transient/classify` for a step of the experiment, else the label."""
        step = label.removesuffix(BASELINE_SUFFIX)
        if step not in self.steps:
            return label
        return f"{self.unit} {self.steps.index(step) + 1} of {len(self.steps)}: {label}"

    def start(self, label: str, scenario: Scenario) -> None:
        self.tally = {}
        description = for_terminal(self.describe(label))  # a sweep's label is user text
        if self.log:
            say(f"{description}: {scenario.trials} trials")
        # The bar's description column is read as markup: `[/]` in a label is text.
        self.bar = self.progress.add_task(escape(description), total=scenario.trials, tally="")

    def trial(self, score: TrialScore) -> None:
        self.tally[score.outcome.value] = self.tally.get(score.outcome.value, 0) + 1
        text = " ".join(f"{k}={v}" for k, v in sorted(self.tally.items()))
        if self.bar is not None:
            self.progress.update(self.bar, advance=1, tally=text)
