"""The propagation graph as inline SVG: the agents contamination passed through, an arrow
for each sender → recipient that carried a contaminated message, labelled with the
number of trials it did, and each agent marked with where contamination started there,
was stopped or first contained (errorflow.scoring.root_cause_summary counts).

Agents are laid out left to right by their longest distance from where contamination
starts (an edge back to an earlier column, a revision loop, is drawn as an arc below).
"""

from __future__ import annotations

from dataclasses import dataclass

from errorflow.core.display import html_text
from errorflow.reports.charts import AXIS, _svg, _text
from errorflow.scoring.root_cause_summary import RootCauseSummary

BOX_W, BOX_H = 136, 38
COL_GAP, ROW_GAP = 70, 26
MARGIN = 16
EDGE = "#c62828"


@dataclass(frozen=True)
class _Box:
    x: float
    y: float

    @property
    def right(self) -> float:
        return self.x + BOX_W

    @property
    def middle(self) -> float:
        return self.y + BOX_H / 2


def _columns(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Each node's column: its longest path from a node nothing reaches (edges that
    would close a cycle are ignored by capping the relaxation at len(nodes) rounds)."""
    col = dict.fromkeys(nodes, 0)
    for _ in range(len(nodes)):
        changed = False
        for a, b in edges:
            if a != b and col[b] < col[a] + 1 and col[a] + 1 < len(nodes):
                col[b], changed = col[a] + 1, True
        if not changed:
            break
    return col


def _layout(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, _Box]:
    col = _columns(nodes, edges)
    rows: dict[int, int] = {}
    boxes: dict[str, _Box] = {}
    for node in nodes:
        c = col[node]
        r = rows.get(c, 0)
        rows[c] = r + 1
        boxes[node] = _Box(MARGIN + c * (BOX_W + COL_GAP), MARGIN + r * (BOX_H + ROW_GAP))
    return boxes


def _note(agent: str, summary: RootCauseSummary) -> str:
    parts = [
        f"{what} {n}"
        for what, counts in (
            ("starts", summary["starts"]),
            ("stopped", summary["stopped"]),
            ("contained", summary["contained_at"]),
        )
        if (n := counts.get(agent, 0))
    ]
    return " · ".join(parts)


def _edge(a: _Box, b: _Box, n: int, peak: int, title: str, bottom: float) -> list[str]:
    width = 1.5 + 4.5 * n / peak
    if b.x > a.x:  # forward: a straight arrow between the boxes' sides
        x1, y1, x2, y2 = a.right, a.middle, b.x, b.middle
        path = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}"
        lx, ly = (x1 + x2) / 2, (y1 + y2) / 2
    else:  # back (or within a column): an arc under the boxes
        x1, x2 = a.x + BOX_W / 2, b.x + BOX_W / 2 + 8
        y1, y2 = a.y + BOX_H, b.y + BOX_H
        path = f"M{x1:.1f},{y1:.1f} Q{(x1 + x2) / 2:.1f},{bottom:.1f} {x2:.1f},{y2:.1f}"
        lx, ly = (x1 + x2) / 2, (y1 + y2) / 4 + bottom / 2
    return [
        f'<path d="{path}" fill="none" stroke="{EDGE}" stroke-opacity=".75" '
        f'stroke-width="{width:.1f}" marker-end="url(#arrow)"><title>{html_text(title)}'
        "</title></path>",
        f'<rect x="{lx - 14:.1f}" y="{ly - 9:.1f}" width="28" height="16" rx="3" '
        f'fill="#fff" stroke="{EDGE}" stroke-width=".6"/>',
        _text(lx, ly + 3, str(n), 11, "middle"),
    ]


def propagation_graph(summary: RootCauseSummary, title: str = "propagation graph") -> str:
    """The graph of one run's contaminated messages, or "" when none was contaminated."""
    edges = [(e["sender"], e["recipient"]) for e in summary["edges"]]
    if not edges:
        return ""
    counts = {(e["sender"], e["recipient"]): e["trials"] for e in summary["edges"]}
    nodes = list(dict.fromkeys([*summary["starts"], *(n for e in edges for n in e)]))
    boxes = _layout(nodes, edges)
    width = int(max(b.right for b in boxes.values()) + MARGIN)
    back = any(boxes[b].x <= boxes[a].x for a, b in edges)  # arcs need room below
    bottom = max(b.y for b in boxes.values()) + BOX_H + (40 if back else 10)
    height = int(bottom + 28)
    peak = max(counts.values())
    body = [
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
        'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{EDGE}"/></marker></defs>'
    ]
    for (a, b), n in counts.items():
        what = f"{a} → {b}: contaminated messages in {n} trials"
        body += _edge(boxes[a], boxes[b], n, peak, what, bottom - 10)
    for node, box in boxes.items():
        starts = summary["starts"].get(node, 0)
        note = _note(node, summary)
        body.append(
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="6" '
            f'fill="{"#ffebee" if starts else "#f5f5f5"}" stroke="{EDGE if starts else AXIS}">'
            f"<title>{html_text(node)}{': ' + note if note else ''}</title></rect>"
        )
        body.append(_text(box.x + BOX_W / 2, box.y + (16 if note else 23), node, 13, "middle"))
        if note:
            body.append(_text(box.x + BOX_W / 2, box.y + 31, note, 10, "middle"))
    body.append(
        _text(MARGIN, height - 8, "arrow: sender → recipient of a contaminated message; "
              "number: trials it happened in", 11)
    )  # fmt: skip
    return _svg(height, title, body, width=max(width, 560))  # the caption fits
