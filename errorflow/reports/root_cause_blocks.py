"""The report's root-cause section: per run, contamination by agent and the propagation
graph with counts on its edges, the table of origins, drops and edges, and the trial
worth reading whole (linked to its trace page in HTML)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from errorflow.core.display import html_text
from errorflow.reports import charts
from errorflow.reports.blocks import Block, Figure, Heading, Para, TableBlock, TraceLinks
from errorflow.reports.propagation.graph import propagation_graph
from errorflow.scoring.root_cause_summary import summary_rows

if TYPE_CHECKING:
    from errorflow.reports.report import ReportArm


def trace_command(run_id: str, trial: int) -> str:
    return f"errorflow trace {run_id} --trial {trial} --format html -o trace.html"


def _figures(arm: ReportArm, many: bool, colour: str) -> list[Block]:
    rc = arm["root_causes"]
    caption = f"<h3>{html_text(arm['label'])}</h3>" if many else ""
    graph = propagation_graph(rc, f"propagation graph of {arm['label']}")
    shown: list[Block] = [Figure(caption + charts.contamination_by_agent(rc, colour))]
    if graph:
        shown.append(Figure(f"<h4>How contamination travelled</h4>{graph}"))
    return shown


def root_cause_blocks(arms: Sequence[ReportArm], colour: str) -> list[Block]:
    """Root causes of the failed trials, per run (when any failed); `arms` are the
    report's."""
    cells = [
        [a["label"], what, where, str(n)]
        for a in arms
        if "root_causes" in a
        for what, where, n in summary_rows(a["root_causes"])
    ]
    if not cells:
        return []
    figures = [
        block
        for a in arms
        if "root_causes" in a and a["root_causes"]["contaminated"]
        for block in _figures(a, len(arms) > 1, colour)
    ]
    traced = [(a["label"], a["run_id"], a["telling_trial"]) for a in arms if "telling_trial" in a]
    return [
        Heading(2, "Root causes"),
        *figures,
        TableBlock(["run", "what", "where", "trials"], cells),
        Para(("Of the failed trials: where the failure started (the agent, tool and error "
              "class of the first failure nothing upstream caused), who dropped it (swallowed "
              "it, passed it on silently, or stated a false claim as certain), where "
              "contamination started and was stopped, the messages that carried it, where it "
              "was first contained, and the contamination depths. The graph draws an arrow "
              "for each sender → recipient of a contaminated message, with the trials it "
              "happened in. One trial whole:",)),
        TraceLinks(traced),
    ]  # fmt: skip
