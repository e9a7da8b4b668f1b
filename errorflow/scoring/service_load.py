"""Load on the services of a run: what reached them, what they refused, and how they
recovered after being down.

From the services' ledgers (errorflow.world.services) and the trials' outcomes by
arrival: calls per trial (the figure retry amplification is measured on, against the
fault-free baseline's), calls refused by kind, calls that reached a service while it
was down, the time from the end of each outage to the first call it answered, and the
success of the trials that arrived during an outage and after it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TypedDict

from errorflow.scoring.score import Outcome, TrialScore
from errorflow.world.services import CallRecord, ServiceRegistry


class OutageJson(TypedDict):
    start_s: float
    end_s: float
    calls_during: int  # calls that reached the service while it was down
    recovered_after_s: float | None  # end of outage → first call answered (None: never)
    trials_during: int
    success_during: float | None  # share of the trials arriving during it that succeeded
    trials_after: int  # trials arriving before the next outage
    success_after: float | None


class ServiceJson(TypedDict):
    calls: int
    calls_per_trial: float
    answered: int
    refused: dict[str, int]  # by verdict: rate_limited, overloaded, down, degraded
    peak_calls_per_s: int
    outages: list[OutageJson]


def service_load(
    registry: ServiceRegistry, scores: Sequence[TrialScore], arrivals: Sequence[float]
) -> dict[str, ServiceJson]:
    out: dict[str, ServiceJson] = {}
    n = max(1, len(scores))
    outcome = {s.trial: s.outcome for s in scores}
    for name, state in registry.services.items():
        calls = state.calls
        verdicts = Counter(c.verdict for c in calls)
        until = max((c.end for c in calls), default=0.0)
        windows = state.outage_windows(until)
        per_second = Counter(int(c.start) for c in calls)
        out[name] = {
            "calls": len(calls),
            "calls_per_trial": round(len(calls) / n, 4),
            "answered": verdicts.get("ok", 0),
            "refused": {v: k for v, k in sorted(verdicts.items()) if v != "ok"},
            "peak_calls_per_s": max(per_second.values(), default=0),
            "outages": [
                _outage(start, end, windows[i + 1][0] if i + 1 < len(windows) else None,
                        calls, outcome, arrivals)
                for i, (start, end) in enumerate(windows)
            ],
        }  # fmt: skip
    return out


def _outage(
    start: float,
    end: float,
    next_start: float | None,
    calls: Sequence[CallRecord],
    outcome: Mapping[int, Outcome],
    arrivals: Sequence[float],
) -> OutageJson:
    during = [c for c in calls if start <= c.start < end]
    answered = sorted(c.start for c in calls if c.verdict == "ok" and c.start >= end)
    in_window = [t for t, a in enumerate(arrivals) if start <= a < end and t in outcome]
    after = [
        t for t, a in enumerate(arrivals)
        if a >= end and (next_start is None or a < next_start) and t in outcome
    ]  # fmt: skip
    return {
        "start_s": start,
        "end_s": end,
        "calls_during": len(during),
        "recovered_after_s": round(answered[0] - end, 6) if answered else None,
        "trials_during": len(in_window),
        "success_during": _share(in_window, outcome),
        "trials_after": len(after),
        "success_after": _share(after, outcome),
    }


def _share(trials: Sequence[int], outcome: Mapping[int, Outcome]) -> float | None:
    if not trials:
        return None
    return round(sum(outcome[t] is Outcome.SUCCESS for t in trials) / len(trials), 4)
