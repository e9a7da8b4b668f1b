"""The propagation graph of the HTML report and the trace page (pure SVG)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from errorflow.reports.propagation.graph import propagation_graph
from errorflow.scoring.root_cause_summary import EdgeCount, RootCauseSummary

SVG = "{http://www.w3.org/2000/svg}"


def summary(edges: list[tuple[str, str, int]], **counts: dict[str, int]) -> RootCauseSummary:
    return RootCauseSummary(
        failed=9,
        contaminated=9,
        origins=[],
        secondary=0,
        dropped=[],
        starts=counts.get("starts", {}),
        stopped=counts.get("stopped", {}),
        contained_at={},
        edges=[EdgeCount(sender=a, recipient=b, trials=n) for a, b, n in edges],
        depths={},
    )


def boxes(svg: str) -> dict[str, float]:
    """Each node's x, by the name written in it."""
    root = ET.fromstring(svg)
    out: dict[str, float] = {}
    for text in root.iter(f"{SVG}text"):
        if text.get("font-size") == "13":
            out[text.text or ""] = float(text.get("x") or 0)
    return out


def test_an_arrow_per_edge_with_its_count_and_the_chain_left_to_right() -> None:
    svg = propagation_graph(
        summary([("triage", "retriever", 7), ("retriever", "responder", 5),
                 ("responder", "runner", 3)], starts={"triage": 7}, stopped={"runner": 1})
    )  # fmt: skip
    root = ET.fromstring(svg)  # well-formed XML, as a browser's SVG parser wants it
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert "triage → retriever: contaminated messages in 7 trials" in titles
    assert "responder → runner: contaminated messages in 3 trials" in titles
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert {"7", "5", "3"} <= set(labels) and "starts 7" in labels
    x = boxes(svg)
    assert x["triage"] < x["retriever"] < x["responder"] < x["runner"]
    widths = [float(w) for p in root.iter(f"{SVG}path") if (w := p.get("stroke-width"))]
    assert widths[0] > widths[1] > widths[2]  # the busier edge is drawn thicker


def test_a_revision_loop_is_an_arc_back_and_nothing_contaminated_is_no_graph() -> None:
    svg = propagation_graph(summary([("writer", "critic", 4), ("critic", "writer", 2)]))
    paths = re.findall(r'<path d="([^"]+)" fill="none"', svg)
    assert len(paths) == 2 and sum(p.count("Q") for p in paths) == 1
    assert boxes(svg)["writer"] < boxes(svg)["critic"]
    assert propagation_graph(summary([])) == ""
