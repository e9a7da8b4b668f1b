"""The report's charts: each mark where its numbers put it, each number in its title."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from errorflow.reports.charts import (
    contamination_by_agent,
    forest,
    outcome_bars,
    rate_whiskers,
    sweep_heatmap,
)
from errorflow.scoring.root_cause_summary import RootCauseSummary
from errorflow.scoring.stats import paired_difference

SVG = "{http://www.w3.org/2000/svg}"
COLOURS = {"success": "#2e7d32", "contained": "#f9a825", "contaminated": "#c62828"}


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed: a browser would refuse anything else


def _titles(svg: str) -> list[str]:
    return [t.text or "" for t in _parse(svg).iter(f"{SVG}title")]


def test_whiskers_put_the_dot_on_the_rate_between_the_interval_ends() -> None:
    svg = rate_whiskers([("explicit", {"success": [0.5, 0.25, 0.75]})], COLOURS)
    group = next(_parse(svg).iter(f"{SVG}g"))
    whisker = group.find(f"{SVG}line")
    dot = group.find(f"{SVG}circle")
    assert whisker is not None and dot is not None
    x1, x2, cx = float(whisker.get("x1", 0)), float(whisker.get("x2", 0)), float(dot.get("cx", 0))
    assert x1 < cx < x2 and abs(cx - (x1 + x2) / 2) < 0.2  # 0.5 halfway from 0.25 to 0.75
    assert _titles(svg) == ["explicit: success 50.0% (95% CI 25.0%–75.0%)"]


def test_the_forest_plot_has_the_line_of_no_difference_and_the_p_value() -> None:
    d = paired_difference([True] * 10 + [False] * 30, [True] * 30 + [False] * 10)
    svg = forest([("success", d)], "explicit − implicit")
    (title,) = _titles(svg)
    assert title.startswith("success: -50.0% (95% CI") and "McNemar exact p < 0.001" in title
    square = next(_parse(svg).iter(f"{SVG}rect"), None)
    assert square is not None
    rects = [r for r in _parse(svg).iter(f"{SVG}rect") if r.get("width") == "10"]
    lines = [ln for ln in _parse(svg).iter(f"{SVG}line") if ln.get("stroke") == "#444"]
    zero = float(lines[0].get("x1", 0))
    assert float(rects[0].get("x", 0)) + 5 < zero  # the difference is left of zero


def test_contamination_by_agent_counts_starts_and_messages_sent_on() -> None:
    summary: RootCauseSummary = {
        "failed": 40,
        "contaminated": 40,
        "origins": [],
        "secondary": 0,
        "dropped": [],
        "starts": {"researcher": 40},
        "stopped": {},
        "contained_at": {},
        "edges": [
            {"sender": "researcher", "recipient": "writer", "trials": 40},
            {"sender": "writer", "recipient": "runner", "trials": 40},
        ],
        "depths": {"2": 40},
    }
    titles = _titles(contamination_by_agent(summary, "#c62828"))
    assert "researcher: contamination starts in 40 trials" in titles
    assert "writer: contaminated messages sent on in 40 trials" in titles
    assert "writer: contamination starts in 0 trials" in titles


def test_the_heatmap_has_a_cell_per_run_with_its_published_figure() -> None:
    axes = [("topology", ["single", "linear"]), ("defence", ["none", "inspector"])]
    counts = {"single/none": [9, 10], "single/inspector": [9, 10], "linear/none": [4, 10]}
    svg = sweep_heatmap(axes, counts, {"linear/none": {"drop": "23.7 %"}})
    titles = _titles(svg)
    assert titles == [
        "single/none: success 9/10 (90%)",
        "single/inspector: success 9/10 (90%)",
        "linear/none: success 4/10 (40%); published drop 23.7 %",
    ]  # linear/inspector did not run: no cell
    fills = {
        t: r.get("fill")
        for g in _parse(svg).iter(f"{SVG}g")
        for t in [g.findtext(f"{SVG}title")]
        for r in g.iter(f"{SVG}rect")
    }
    assert fills["single/none: success 9/10 (90%)"] != fills[titles[2]]  # darker: more success


def test_outcome_bars_split_each_run_by_its_counts() -> None:
    svg = outcome_bars(
        [("explicit", {"success": 1, "contained": 3})], ["success", "contained"], COLOURS
    )
    widths = [
        float(r.get("width", 0))
        for r in _parse(svg).iter(f"{SVG}rect")
        if r.find(f"{SVG}title") is not None
    ]
    assert len(widths) == 2 and abs(widths[1] / widths[0] - 3) < 0.01
    assert re.search(r"<title>contained: 3</title>", svg)
