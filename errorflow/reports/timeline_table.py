"""The timeline (errorflow.reports.timeline) as a text table: the chart's buckets merged
into at most a dozen periods, a row per service and period, with the breakers' states
in that period (the Markdown report's form of the chart; the HTML report shows both).
"""

from __future__ import annotations

import math

from errorflow.reports.timeline import BreakerSeries, ServiceSeries, TimelineJson

HEAD = [
    "service", "run time (s)", "calls (baseline)", "answered", "429", "failed", "shed", "down",
    "breakers",
]  # fmt: skip
#: Most periods a table has per service.
MOST = 12


def periods(tl: TimelineJson, most: int = MOST) -> list[tuple[int, int]]:
    """[first, last) bucket indexes of each period: consecutive buckets merged."""
    k = max(1, math.ceil(tl["buckets"] / most))
    return [(i, min(i + k, tl["buckets"])) for i in range(0, tl["buckets"], k)]


def timeline_rows(tl: TimelineJson, most: int = MOST) -> list[list[str]]:
    """HEAD's cells; a service-less run (breakers only) gets one row per period."""
    width = tl["bucket_s"]
    rows = []
    services: list[tuple[str, ServiceSeries | None]] = list(tl["services"].items()) or [("-", None)]
    for name, s in services:
        for lo, hi in periods(tl, most):
            t0, t1 = lo * width, min(hi * width, tl["span_s"])
            cells = _service_cells(s, lo, hi) if s is not None else ["-"] * 6
            breakers = "; ".join(filter(None, (_states(b, t0, t1) for b in tl["breakers"])))
            rows.append([name, f"{t0:g}–{t1:g}", *cells, breakers or "-"])
    return rows


def _service_cells(s: ServiceSeries, lo: int, hi: int) -> list[str]:
    def total(series: list[int]) -> int:
        return sum(series[lo:hi])

    calls = str(total(s["calls"]))
    base = s.get("baseline_calls")
    if base is not None:
        calls += f" ({total(base)})"
    down = "yes" if any(s["down"][lo:hi]) else "-"
    counts = (s["answered"], s["rate_limited"], s["failed"], s["shed"])
    return [calls, *(str(total(c)) for c in counts), down]


def _states(b: BreakerSeries, t0: float, t1: float) -> str:
    """The states other than closed the breaker was in between t0 and t1, with the
    number of trials for a trial-scoped one ("" when it stayed closed)."""
    trials: dict[str, set[int]] = {}
    for iv in b["intervals"]:
        if iv["state"] != "closed" and iv["start_s"] < t1 and iv["end_s"] > t0:
            trials.setdefault(iv["state"], set()).add(iv.get("trial", -1))
    if not trials:
        return ""
    shown = [
        state if b["scope"] == "run" else f"{state} ×{len(ts)}" for state, ts in trials.items()
    ]
    pattern = f"[{b['pattern']}]" if b["pattern"] else ""
    return f"{b['agent']}/{b['tool']}{pattern}: {', '.join(shown)}"
