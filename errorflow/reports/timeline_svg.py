"""The timeline (errorflow.reports.timeline) drawn as one inline SVG: no script, no
font or file from outside, readable printed in grey.

One lane per service: a bar per bucket of the calls that reached it (answered, 429,
failed) with the calls shed before they went out stacked on top, the fault-free
baseline's calls as a dashed step line, its outage windows shaded, and under it a strip
that marks every bucket with a 429 or a failure (a single one is hard to see in a tall
bar). One lane per breaker, coloured by state. The axis is in run seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from errorflow.core.display import html_text
from errorflow.reports.timeline import (
    STATES,
    BreakerSeries,
    ServiceSeries,
    TimelineJson,
)

WIDTH, LEFT, RIGHT, TOP = 720, 170, 12, 8
SERVICE_H, MARK_H, BREAKER_H, GAP = 64, 6, 14, 10
#: Most lanes drawn; the rest are counted under the chart.
MAX_LANES = 16
LOAD = {  # stacked bottom to top
    "answered": "#1565c0",
    "rate_limited": "#ef6c00",
    "failed": "#c62828",
    "shed": "#bdbdbd",
}
LOAD_LABELS = {
    "answered": "answered",
    "rate_limited": "429",
    "failed": "failed (5xx, timeout)",
    "shed": "shed (never sent)",
}
STATE_COLOURS = {
    "closed": "#c8e6c9",
    "half_open": "#ffca28",
    "open": "#e53935",
    "forced_open": "#7f0000",
    "disabled": "#9e9e9e",
}
DOWN = "#fde0dc"
BASELINE = "#212121"


class _Plot:
    """Run seconds to x pixels."""

    def __init__(self, span_s: float) -> None:
        self.span = span_s if span_s > 0 else 1.0
        self.width = WIDTH - LEFT - RIGHT

    def x(self, t: float) -> float:
        return LEFT + self.width * min(max(t, 0.0), self.span) / self.span


def timeline_svg(
    tl: TimelineJson, title: str = "timeline", peaks: Mapping[str, int] | None = None
) -> str:
    """`peaks`: the top of each service's scale (calls per bucket), to draw several runs
    to one scale; by default each lane's own highest bar."""
    plot = _Plot(tl["span_s"])
    services = list(tl["services"].items())[:MAX_LANES]
    breakers = tl["breakers"][: max(0, MAX_LANES - len(services))]
    parts: list[str] = []
    y = TOP
    for name, series in services:
        top = (peaks or {}).get(name, lane_peak(series))
        parts += _service_lane(name, series, tl, plot, y, top)
        y += SERVICE_H + MARK_H + GAP
    for b in breakers:
        parts += _breaker_lane(b, plot, y)
        y += BREAKER_H + GAP
    bottom = y - GAP
    parts = _grid(plot, TOP, bottom) + parts  # the grid goes under the bars
    parts += _axis(plot, bottom)
    hidden = len(tl["services"]) + len(tl["breakers"]) - len(services) - len(breakers)
    legend, height = _legend(tl, bottom + 52, hidden)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{html_text(title)}" '
        'font-family="sans-serif">'
        f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>'
    )
    return head + "".join(parts + legend) + "</svg>"


def lane_peak(s: ServiceSeries) -> int:
    """The highest bar or baseline step of a service's lane (at least 1)."""
    totals = [c + shed for c, shed in zip(s["calls"], s["shed"], strict=True)]
    return max([*totals, *(s.get("baseline_calls") or []), 1])


def _service_lane(
    name: str, s: ServiceSeries, tl: TimelineJson, plot: _Plot, top: int, peak: int
) -> list[str]:
    base = s.get("baseline_calls")
    scale = (SERVICE_H - 4) / peak
    floor = top + SERVICE_H
    out = [
        f'<text x="4" y="{top + 14}" font-size="12" font-weight="bold">{_label(name, 22)}</text>',
        f'<text x="4" y="{top + 29}" font-size="10" fill="#555">calls per '
        f"{tl['bucket_s']:g} s, top {peak}</text>",
        f'<rect x="{LEFT}" y="{top}" width="{plot.width}" height="{SERVICE_H}" fill="none" '
        'stroke="#ddd"/>',
    ]
    for start, end in s["outages"]:
        x0, x1 = plot.x(start), plot.x(end)
        out.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(1.0, x1 - x0):.1f}" height="{SERVICE_H}" '
            f'fill="{DOWN}"><title>down {start:g}–{end:g} s</title></rect>'
        )
    width = tl["bucket_s"]
    for i in range(tl["buckets"]):
        x0, x1 = plot.x(i * width), plot.x((i + 1) * width)
        w = max(1.0, x1 - x0 - 1)
        y = float(floor)
        tip = _tip(s, i, width)
        for kind, colour in LOAD.items():
            h = _load(s, kind)[i] * scale
            if h > 0:
                y -= h
                out.append(
                    f'<rect x="{x0:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                    f'fill="{colour}"><title>{tip}</title></rect>'
                )
        out += _marks(s, i, x0, w, floor + 1)
    if base is not None:
        out.append(_step_line(base, plot, width, floor, scale))
    return out


def _tip(s: ServiceSeries, i: int, width: float) -> str:
    base = s.get("baseline_calls")
    text = (
        f"{i * width:g}–{(i + 1) * width:g} s: {s['calls'][i]} calls ({s['answered'][i]} "
        f"answered, {s['rate_limited'][i]} 429, {s['failed'][i]} failed), {s['shed'][i]} shed"
    )
    text += f", baseline {base[i]}" if base is not None else ""
    return text + (", down" if s["down"][i] else "")


def _marks(s: ServiceSeries, i: int, x: float, w: float, y: int) -> list[str]:
    """The strip under a lane: orange for a bucket with a 429, red with a failure."""
    kinds = [k for k in ("rate_limited", "failed") if s[k][i]]
    return [
        f'<rect x="{x + j * w / len(kinds):.1f}" y="{y}" width="{w / len(kinds):.1f}" '
        f'height="{MARK_H - 1}" fill="{LOAD[k]}"/>'
        for j, k in enumerate(kinds)
    ]


def _step_line(base: list[int], plot: _Plot, width: float, floor: int, scale: float) -> str:
    points = []
    for i, n in enumerate(base):
        y = floor - n * scale
        points += [f"{plot.x(i * width):.1f},{y:.1f}", f"{plot.x((i + 1) * width):.1f},{y:.1f}"]
    return (
        f'<polyline points="{" ".join(points)}" fill="none" stroke="{BASELINE}" '
        'stroke-width="1.5" stroke-dasharray="4 2"><title>fault-free baseline</title></polyline>'
    )


def _breaker_lane(b: BreakerSeries, plot: _Plot, top: int) -> list[str]:
    pattern = f" [{b['pattern']}]" if b["pattern"] else ""
    name = _label(f"{b['agent']} › {b['tool']}{pattern}", 22)
    out = [
        f'<text x="4" y="{top + 11}" font-size="11">{name}<tspan font-size="9" fill="#555">'
        f" ({b['scope']})</tspan><title>scope: {b['scope']}</title></text>",
        f'<rect x="{LEFT}" y="{top}" width="{plot.width}" height="{BREAKER_H}" '
        f'fill="{STATE_COLOURS["closed"]}"><title>closed</title></rect>',
    ]
    # Trial-scoped breakers of overlapping trials overlap: the worse state is drawn last.
    for iv in sorted(b["intervals"], key=lambda iv: _severity(iv["state"])):
        if iv["state"] == "closed":
            continue
        x0, x1 = plot.x(iv["start_s"]), plot.x(iv["end_s"])
        trial = f", trial {iv['trial']}" if "trial" in iv else ""
        out.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(1.0, x1 - x0):.1f}" '
            f'height="{BREAKER_H}" fill="{STATE_COLOURS.get(iv["state"], "#000")}">'
            f"<title>{html_text(iv['state'])} {iv['start_s']:g}–{iv['end_s']:g} s{trial}"
            "</title></rect>"
        )
    return out


def _severity(state: str) -> int:
    return STATES.index(state) if state in STATES else len(STATES)


def tick_step(span_s: float, most: int = 8) -> float:
    """A round step (1, 2 or 5 × 10^k) giving at most `most` ticks over the span."""
    span = span_s if span_s > 0 else 1.0
    exp = math.floor(math.log10(span / most))
    for e in (exp, exp + 1):
        for k in (1, 2, 5):
            step = float(f"{k}e{e}")
            if span / step <= most:
                return step
    return float(f"1e{exp + 2}")


def _ticks(plot: _Plot) -> list[float]:
    step = tick_step(plot.span)
    return [i * step for i in range(int(plot.span / step + 1e-9) + 1)]


def _grid(plot: _Plot, top: int, bottom: int) -> list[str]:
    return [
        f'<line x1="{plot.x(t):.1f}" y1="{top}" x2="{plot.x(t):.1f}" y2="{bottom}" stroke="#eee"/>'
        for t in _ticks(plot)
    ]


def _axis(plot: _Plot, bottom: int) -> list[str]:
    y = bottom + 4
    out = [f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + plot.width}" y2="{y}" stroke="#444"/>']
    for t in _ticks(plot):
        x = plot.x(t)
        out.append(
            f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#444"/>'
            f'<text x="{x:.1f}" y="{y + 15}" font-size="10" text-anchor="middle">{t:g}</text>'
        )
    out.append(
        f'<text x="{LEFT + plot.width}" y="{y + 28}" font-size="10" text-anchor="end" '
        'fill="#555">run time (simulated s)</text>'
    )
    return out


def _legend(tl: TimelineJson, y: int, hidden: int) -> tuple[list[str], int]:
    items: list[tuple[str, str]] = []  # (swatch markup at x=0, label)
    if tl["services"]:
        used = {k for s in tl["services"].values() for k in LOAD if sum(_load(s, k))}
        shown = [k for k in LOAD if k == "answered" or k in used]
        items += [(_swatch(LOAD[k]), LOAD_LABELS[k]) for k in shown]
        if any(s["outages"] for s in tl["services"].values()):
            items.append((_swatch(DOWN, "#e0a8a0"), "service down"))
        if any("baseline_calls" in s for s in tl["services"].values()):
            line = f'<line x1="0" y1="-4" x2="12" y2="-4" stroke="{BASELINE}" '
            items.append((line + 'stroke-width="1.5" stroke-dasharray="4 2"/>', "baseline"))
    seen = {iv["state"] for b in tl["breakers"] for iv in b["intervals"]}
    if tl["breakers"]:
        seen.add("closed")
    items += [
        (_swatch(STATE_COLOURS[s]), f"breaker {s.replace('_', '-')}") for s in STATES if s in seen
    ]
    out, x = [], float(LEFT)
    for swatch, label in items:
        width = 22 + 6.2 * len(label)
        if x + width > WIDTH - RIGHT:
            x, y = float(LEFT), y + 16
        out.append(
            f'<g transform="translate({x:.0f},{y})">{swatch}'
            f'<text x="16" y="0" font-size="10">{label}</text></g>'
        )
        x += width
    if hidden:
        y += 16
        out.append(f'<text x="{LEFT}" y="{y}" font-size="10">{hidden} more lane(s) not drawn '
                   "(see the JSON report)</text>")  # fmt: skip
    return out, y + 8


def _swatch(fill: str, stroke: str | None = None) -> str:
    edge = f' stroke="{stroke}"' if stroke else ""
    return f'<rect x="0" y="-9" width="12" height="10" fill="{fill}"{edge}/>'


def _label(text: str, most: int) -> str:
    """`text` as SVG text, cut to `most` characters (the lane labels' column is narrow)."""
    return html_text(text if len(text) <= most else text[: most - 1] + "…", limit=None)


def _load(s: ServiceSeries, kind: str) -> list[int]:
    """One of the stacked series by name (LOAD's keys)."""
    series: dict[str, list[int]] = {
        "answered": s["answered"],
        "rate_limited": s["rate_limited"],
        "failed": s["failed"],
        "shed": s["shed"],
    }
    return series[kind]
