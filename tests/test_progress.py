"""Progress: the rate and the time left, and plain lines where no bar shows (a CI log)."""

from __future__ import annotations

import pytest
from rich.progress import Progress

from errorflow.cli import progress as progress_module
from errorflow.cli.progress import Bars, eta_text, rate_text
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import load_scenario
from errorflow.scoring.score import Outcome, TrialScore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _score(trial: int, outcome: Outcome = Outcome.CONTAINED) -> TrialScore:
    return TrialScore(trial=trial, outcome=outcome, depth=0)


@pytest.mark.parametrize(
    ("done", "total", "elapsed", "rate", "eta"),
    [
        (0, 10, 0.0, "-", "ETA -"),
        (5, 10, 10.0, "0.5 trials/s", "ETA 0:10"),
        (100, 2500, 2.0, "50.0 trials/s", "ETA 0:48"),
        (1000, 100_000, 2.0, "500 trials/s", "ETA 3:18"),
        (10, 100_000, 10.0, "1.0 trials/s", "ETA 27:46:30"),
        (2, 4, 150.0, "75 s/trial", "ETA 2:30"),
    ],
)
def test_rate_and_time_left(done: int, total: int, elapsed: float, rate: str, eta: str) -> None:
    assert rate_text(done, elapsed) == rate
    assert eta_text(done, total, elapsed) == eta


def test_without_a_terminal_a_line_every_few_seconds_and_one_when_finishing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines: list[str] = []
    monkeypatch.setattr(progress_module, "say", lines.append)
    clock = Clock()
    scenario = load_scenario(resolve("contamination")).model_copy(update={"trials": 4})
    bars = Bars(Progress(disable=True), ["contamination"], log=True, clock=clock, every_s=5.0)
    bars.start("contamination", scenario)
    bars.trial(_score(0))
    clock.now += 6
    bars.trial(_score(1, Outcome.CONTAMINATED))
    clock.now += 1  # not yet five seconds since the last line
    bars.trial(_score(2))
    clock.now += 1
    bars.trial(_score(3))
    assert lines == [
        "cell 1 of 1: contamination: 4 trials",
        "cell 1 of 1: contamination: 2/4 trials, 0.3 trials/s, ETA 0:06, "
        "contained=1 contaminated=1",
        "cell 1 of 1: contamination: 4/4 trials, 0.5 trials/s, ETA 0:00, "
        "contained=3 contaminated=1; finishing: merging and writing the store",
    ]


def test_with_a_bar_the_finishing_note_is_on_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(progress_module, "say", lines.append)
    scenario = load_scenario(resolve("contamination")).model_copy(update={"trials": 1})
    shown = Progress(disable=False)
    bars = Bars(shown, log=True)  # a bar shows: no plain lines
    bars.start("contamination", scenario)
    bars.trial(_score(0))
    assert lines == []
    (task,) = shown.tasks
    assert task.description.endswith("(finishing: merging and writing the store)")
