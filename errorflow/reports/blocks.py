"""A report as a list of blocks, written once and rendered to each format that shows it
to a reader (Markdown, HTML); charts are HTML only."""

from __future__ import annotations

from dataclasses import dataclass

from errorflow.reports.timeline import TimelineJson


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    spans: tuple[str | Strong, ...]


@dataclass(frozen=True)
class TableBlock:
    head: list[str]
    rows: list[list[str]]
    #: HTML: folded under this summary line (the table repeats a chart above it).
    folded: str | None = None


@dataclass(frozen=True)
class Items:
    items: list[str]


@dataclass(frozen=True)
class OutcomeChart:
    """The outcome bars (HTML only)."""


@dataclass(frozen=True)
class TimelineChart:
    """One run's timeline chart, or (None) the line saying no run has one (HTML only)."""

    label: str
    timeline: TimelineJson | None


@dataclass(frozen=True)
class Figure:
    """A chart drawn from the report's data (errorflow.reports.charts; HTML only)."""

    svg: str


@dataclass(frozen=True)
class TraceLinks:
    """Per run, the trial worth reading whole: `(label, run id, trial)`; HTML links each to
    its page when one was written beside the report, else names the command."""

    trials: list[tuple[str, str, int]]


Block = Heading | Para | TableBlock | Items | OutcomeChart | TimelineChart | Figure | TraceLinks
