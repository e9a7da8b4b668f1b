"""The HTML report's charts as inline SVG (no scripts, no libraries): outcome rates with
their intervals, the paired differences as a forest plot, contamination by agent, and a
sweep's success as a heatmap with the published figures beside.

Every chart takes plain data (the report's JSON pieces) and returns one `<svg>` string;
each mark carries a `<title>` with its exact numbers, which a browser shows on hover.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from errorflow.core.display import html_text
from errorflow.scoring.root_cause_summary import RootCauseSummary
from errorflow.scoring.stats import PairedDifference

FONT = 'font-family="system-ui,sans-serif"'
AXIS = "#444"
GRID = "#ddd"
WIDTH = 640


def _svg(height: int, label: str, body: list[str], width: int = WIDTH) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{html_text(label)}" {FONT}>'
        f'<rect width="{width}" height="{height}" fill="#fff"/>' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, size: int = 12, anchor: str = "start") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">'
        f"{html_text(text)}</text>"
    )


class _Scale:
    """Linear x positions of values in [low, high] between two pixel columns."""

    def __init__(self, low: float, high: float, left: float, right: float) -> None:
        self.low, self.high, self.left, self.right = low, high, left, right

    def __call__(self, v: float) -> float:
        span = self.high - self.low or 1.0
        return (
            self.left
            + (self.right - self.left) * (min(max(v, self.low), self.high) - self.low) / span
        )

    def ticks(self, values: Sequence[float], y0: float, y1: float, fmt: str) -> list[str]:
        out = []
        for v in values:
            x = self(v)
            out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y1}" stroke="{GRID}"/>')
            out.append(_text(x, y1 + 14, format(v, fmt), 11, "middle"))
        return out


def rate_whiskers(
    rows: Sequence[tuple[str, Mapping[str, Sequence[float]]]],
    colours: Mapping[str, str],
) -> str:
    """Each run's rate of each outcome as a dot on its 95 % interval.
    rows: (run label, {outcome: [rate, low, high]})."""
    outcomes = list(dict.fromkeys(o for _, rates in rows for o in rates))
    left, line_h = 170, 16
    block = len(outcomes) * line_h + 10
    height = len(rows) * block + 60
    x = _Scale(0.0, 1.0, left, WIDTH - 20)
    body = x.ticks([0, 0.25, 0.5, 0.75, 1.0], 10, height - 40, ".0%")
    for i, (label, rates) in enumerate(rows):
        top = 10 + i * block
        body.append(_text(0, top + line_h, label, 13))
        for j, o in enumerate(outcomes):
            if o not in rates:
                continue
            rate, low, high = rates[o]
            y = top + j * line_h + line_h / 2 + 2
            title = (
                f"<title>{html_text(label)}: {o} {rate:.1%} (95% CI {low:.1%}–{high:.1%})</title>"
            )
            body.append(
                f'<g stroke="{colours[o]}" fill="{colours[o]}">{title}'
                f'<line x1="{x(low):.1f}" y1="{y}" x2="{x(high):.1f}" y2="{y}" stroke-width="2"/>'
                f'<line x1="{x(low):.1f}" y1="{y - 4}" x2="{x(low):.1f}" y2="{y + 4}"/>'
                f'<line x1="{x(high):.1f}" y1="{y - 4}" x2="{x(high):.1f}" y2="{y + 4}"/>'
                f'<circle cx="{x(rate):.1f}" cy="{y}" r="4"/></g>'
            )
    legend_y = height - 8
    for k, o in enumerate(outcomes):
        lx = left + k * 130
        body.append(f'<circle cx="{lx + 5}" cy="{legend_y - 4}" r="4" fill="{colours[o]}"/>')
        body.append(_text(lx + 14, legend_y, o))
    return _svg(height, "outcome rates with 95 % intervals", body)


def forest(rows: Sequence[tuple[str, PairedDifference]], title: str) -> str:
    """Paired differences as a forest plot: a point and its 95 % interval per row, the
    line of no difference, and the exact McNemar p-value beside."""
    left, right_text, line_h = 170, 150, 28
    height = len(rows) * line_h + 50
    extent = max([0.05, *(max(abs(d["low"]), abs(d["high"])) for _, d in rows)])
    x = _Scale(-extent, extent, left, WIDTH - right_text)
    ticks = [-extent, -extent / 2, 0.0, extent / 2, extent]
    body = [_text(left, 12, title, 12)]
    body += x.ticks(ticks, 20, height - 30, "+.0%")
    body.append(
        f'<line x1="{x(0):.1f}" y1="20" x2="{x(0):.1f}" y2="{height - 30}" stroke="{AXIS}"/>'
    )
    for i, (label, d) in enumerate(rows):
        y = 20 + i * line_h + line_h / 2
        p = d["p"]
        shown_p = "p < 0.001" if p < 0.001 else f"p = {p:.3g}"
        title_text = (
            f"{label}: {d['diff']:+.1%} (95% CI {d['low']:+.1%} to {d['high']:+.1%}); "
            f"discordant {d['only_a']} vs {d['only_b']} of {d['n']}; McNemar exact {shown_p}"
        )
        body.append(_text(0, y + 4, label, 13))
        body.append(
            f'<g stroke="{AXIS}" fill="{AXIS}"><title>{html_text(title_text)}</title>'
            f'<line x1="{x(d["low"]):.1f}" y1="{y}" x2="{x(d["high"]):.1f}" y2="{y}" '
            f'stroke-width="2"/><rect x="{x(d["diff"]) - 5:.1f}" y="{y - 5}" width="10" '
            f'height="10"/></g>'
        )
        body.append(_text(WIDTH - right_text + 10, y + 4, f"{d['diff']:+.1%}, {shown_p}", 11))
    return _svg(height, title, body)


def contamination_by_agent(summary: RootCauseSummary, colour: str) -> str:
    """Per agent: in how many trials contamination started there, and how many
    contaminated messages it sent on (the edges it is the sender of)."""
    sent: dict[str, int] = {}
    for e in summary["edges"]:
        sent[e["sender"]] = sent.get(e["sender"], 0) + e["trials"]
    agents = list(dict.fromkeys([*summary["starts"], *sent, *summary["stopped"]]))
    left, bar_h = 170, 12
    block = 3 * bar_h + 12
    height = len(agents) * block + 60
    peak = max([1, *summary["starts"].values(), *sent.values(), *summary["stopped"].values()])
    x = _Scale(0, peak, left, WIDTH - 60)
    body: list[str] = []
    kinds = (
        ("contamination starts", summary["starts"], colour),
        ("contaminated messages sent on", sent, "#ef9a9a"),
        ("contamination stopped", summary["stopped"], "#2e7d32"),
    )
    for i, agent in enumerate(agents):
        top = 10 + i * block
        body.append(_text(0, top + 2 * bar_h, agent, 13))
        for j, (kind, counts, fill) in enumerate(kinds):
            n = counts.get(agent, 0)
            y = top + j * bar_h
            body.append(
                f'<rect x="{left}" y="{y}" width="{x(n) - left:.1f}" height="{bar_h - 2}" '
                f'fill="{fill}"><title>{html_text(agent)}: {kind} in {n} trials</title></rect>'
            )
            if n:
                body.append(_text(x(n) + 4, y + bar_h - 3, str(n), 10))
    for k, (kind, _, fill) in enumerate(kinds):  # one line each: the names are long
        ly = height - 46 + k * 15
        body.append(f'<rect x="{left}" y="{ly - 9}" width="10" height="10" fill="{fill}"/>')
        body.append(_text(left + 14, ly, kind, 11))
    return _svg(height, "contamination by agent", body)


def _shade(rate: float) -> str:
    """White (0 %) to the success green (100 %)."""
    r, g, b = (round(255 + (c - 255) * rate) for c in (0x2E, 0x7D, 0x32))
    return f"#{r:02x}{g:02x}{b:02x}"


def sweep_heatmap(
    axes: Sequence[tuple[str, Sequence[str]]],
    counts: Mapping[str, Sequence[int]],
    published: Mapping[str, Mapping[str, str]],
) -> str:
    """Success of every cell: the last axis across, the other axes' combinations down;
    the published figures of a cell under its count."""
    *row_axes, (col_name, col_values) = axes
    combos = list(itertools.product(*(values for _, values in row_axes))) or [()]
    left, cell_w, cell_h, top = 200, 110, 40, 40
    width = max(WIDTH, left + cell_w * len(col_values) + 10)
    height = top + cell_h * len(combos) + 30
    body = [_text(left, 14, f"{col_name} →", 12)]
    body.append(_text(0, 14, " / ".join(name for name, _ in row_axes) + " ↓", 12))
    for c, value in enumerate(col_values):
        body.append(_text(left + c * cell_w + cell_w / 2, top - 8, value, 12, "middle"))
    for r, combo in enumerate(combos):
        y = top + r * cell_h
        body.append(_text(0, y + cell_h / 2 + 4, " / ".join(combo), 12))
        for c, value in enumerate(col_values):
            label = "/".join([*combo, value])
            if label not in counts:
                continue
            success, measured = counts[label]
            rate = success / measured if measured else 0.0
            figures = "; ".join(f"{k} {v}" for k, v in published.get(label, {}).items())
            title = f"{label}: success {success}/{measured} ({rate:.0%})"
            title += f"; published {figures}" if figures else ""
            x0 = left + c * cell_w
            ink = "#fff" if rate > 0.55 else "#222"
            body.append(
                f'<g><title>{html_text(title)}</title><rect x="{x0}" y="{y}" width="{cell_w - 2}" '
                f'height="{cell_h - 2}" fill="{_shade(rate)}" stroke="{GRID}"/>'
                f'<text x="{x0 + cell_w / 2:.1f}" y="{y + 17}" font-size="12" text-anchor="middle" '
                f'fill="{ink}">{success}/{measured}</text>'
            )
            if figures:
                body.append(
                    f'<text x="{x0 + cell_w / 2:.1f}" y="{y + 31}" font-size="9" '
                    f'text-anchor="middle" fill="{ink}">pub. {html_text(figures[:24])}</text>'
                )
            body.append("</g>")
    body.append(_text(left, height - 8, "success / measured trials; darker: more success", 11))
    return _svg(height, "sweep success by cell", body, width)


def outcome_bars(
    rows: Sequence[tuple[str, Mapping[str, int]]], shown: Sequence[str], colours: Mapping[str, str]
) -> str:
    """Stacked horizontal bars: the outcome mix of each run (rows: label, counts)."""
    bar_h, gap, left = 22, 10, 170
    height = len(rows) * (bar_h + gap) + 30
    body: list[str] = []
    for i, (label, counts) in enumerate(rows):
        y = i * (bar_h + gap)
        body.append(_text(0, y + 16, label, 13))
        x = float(left)
        total = max(1, sum(counts.get(o, 0) for o in shown))
        for o in shown:
            w = (WIDTH - left - 10) * counts.get(o, 0) / total
            if w > 0:
                body.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                    f'fill="{colours[o]}"><title>{o}: {counts.get(o, 0)}</title></rect>'
                )
            x += w
    y = len(rows) * (bar_h + gap) + 14
    step = min(110, (WIDTH - left) // len(shown))  # the legend stays inside the picture
    for k, o in enumerate(shown):
        x = left + k * step
        body.append(f'<rect x="{x}" y="{y - 10}" width="10" height="10" fill="{colours[o]}"/>')
        body.append(_text(x + 14, y, o))
    return _svg(height, "outcomes per run", body)
