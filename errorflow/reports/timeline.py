"""A run over its run time: the load on each service and the state of each breaker,
per bucket of simulated seconds (the report's timeline chart and table).

Pure: a run's stored events in, time series out. The services' own ledgers are not
stored, so the calls are rebuilt from the agents' records of them: a `tool_call` per
logical call (its attempt count, stamped when it ended), a `retry` per failed attempt
that was retried (stamped when it failed), a `call_refused` per attempt a client-side
limiter or bulkhead kept from going out, and a `breaker` per transition. Every other
attempt of a tool backed by a service reached that service (the ledger's count,
errorflow.world.services) and lands in the bucket in which it ended. An injected
per-call fault on such a tool counts as a call too: the events do not tell it apart
from the service's own answer.

Per bucket and service: calls that reached it (answered, refused with 429, failed with
a 5xx or a timeout), calls shed before they went out (an open circuit, a limiter or a
bulkhead) and whether it was down (its outage windows); with a fault-free baseline,
the baseline's calls on the same buckets (retry amplification over time). Per breaker
(agent, tool, argument pattern): the intervals of its states, from its transitions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.events import (
    BreakerChange,
    CallRefused,
    Event,
    RetryScheduled,
    ToolCallEvent,
)

Scope = Literal["trial", "run"]
#: What became of one attempt: three ways a service answered it, two ways it was shed.
Kind = Literal["answered", "rate_limited", "failed", "limited", "circuit_open"]
REACHED: frozenset[Kind] = frozenset({"answered", "rate_limited", "failed"})
#: The failures a service (or the network in front of it) gives; any other code came
#: with an answer (empty, partial, a business rule) or before the call.
SERVICE_FAILURES = frozenset({ErrorCode.TRANSIENT, ErrorCode.TIMEOUT})
#: At most this many buckets; their width is 1, 2 or 5 times a power of ten.
MAX_BUCKETS = 60
#: Drawn and listed from the least to the most severe (the chart paints in this order).
STATES = ("closed", "half_open", "open", "forced_open", "disabled")


@dataclass(frozen=True, slots=True)
class Attempt:
    trial: int
    agent: str
    tool: str
    at: float  # run time it ended (or was refused)
    kind: Kind


@dataclass(frozen=True)
class RunEvents:
    """What the timeline needs of one stored run."""

    #: (trial, event), each agent's events in the order it emitted them.
    events: Sequence[tuple[int, Event]]
    #: Each service of the scenario and its outage windows (start_s, end_s).
    services: Mapping[str, Sequence[tuple[float, float]]] = field(default_factory=dict)
    tool_services: Mapping[str, str] = field(default_factory=dict)  # tool -> service
    #: Each agent's breaker scope, for its tools and for its model ("trial" if absent).
    tool_breaker_scope: Mapping[str, Scope] = field(default_factory=dict)
    model_breaker_scope: Mapping[str, Scope] = field(default_factory=dict)

    @property
    def last_at(self) -> float:
        return max((e.at or 0.0 for _, e in self.events if hasattr(e, "at")), default=0.0)


class ServiceSeries(TypedDict):
    calls: list[int]  # reached the service: answered + rate_limited + failed
    answered: list[int]
    rate_limited: list[int]  # 429
    failed: list[int]  # 5xx, connection errors, timeouts
    shed: list[int]  # never went out: an open circuit, a limiter or a bulkhead
    down: list[bool]  # the bucket overlaps an outage window
    outages: list[list[float]]  # [start_s, end_s], clipped to the span
    baseline_calls: NotRequired[list[int]]  # the fault-free baseline's calls


class Interval(TypedDict):
    state: str
    start_s: float
    end_s: float
    trial: NotRequired[int]  # a trial-scoped breaker's trial


class BreakerSeries(TypedDict):
    agent: str
    tool: str  # "model" for the model's breaker
    pattern: str | None
    scope: Scope
    transitions: int
    #: scope run: every state from 0 to the span; scope trial: from each trial's first
    #: transition to that agent's last event of the trial (closed outside them).
    intervals: list[Interval]


class TimelineJson(TypedDict):
    bucket_s: float
    buckets: int
    span_s: float
    services: dict[str, ServiceSeries]
    breakers: list[BreakerSeries]


def bucket_width(span_s: float, most: int = MAX_BUCKETS) -> float:
    """The smallest round width (1, 2 or 5 × 10^k seconds) giving at most `most` buckets."""
    if span_s <= 0:
        return 1.0
    exp = math.floor(math.log10(span_s / most))
    for e in (exp, exp + 1):
        for k in (1, 2, 5):
            width = float(f"{k}e{e}")
            if math.ceil(span_s / width - 1e-9) <= most:
                return width
    return float(f"1e{exp + 2}")  # unreachable: 10^(exp+1) already fits


def attempts(events: Iterable[tuple[int, Event]]) -> list[Attempt]:
    """Every attempt of every tool call, and every call refused by an open circuit."""
    out: list[Attempt] = []
    retries: dict[tuple[int, str, str], dict[int, Attempt]] = {}
    refused: dict[tuple[int, str, str], int] = {}  # limiter/bulkhead refusals not matched
    for trial, e in events:
        if not isinstance(e, CallRefused | RetryScheduled | ToolCallEvent):
            continue
        key = (trial, e.agent, e.tool)
        if isinstance(e, CallRefused):
            refused[key] = refused.get(key, 0) + 1
        elif isinstance(e, RetryScheduled):
            failed = Attempt(trial, e.agent, e.tool, e.at or 0.0, _kind(e.code, refused, key))
            retries.setdefault(key, {})[e.attempt] = failed
        else:
            mine, at = retries.pop(key, {}), e.at or 0.0
            if e.attempts == 0:
                if e.code is ErrorCode.CIRCUIT_OPEN:
                    out.append(Attempt(trial, e.agent, e.tool, at, "circuit_open"))
                continue
            last: Attempt | None = None  # the attempt the call ended on
            for n in range(1, e.attempts + 1):
                if n in mine:
                    out.append(mine[n])
                    continue
                if last is None:
                    last = Attempt(trial, e.agent, e.tool, at, _kind(e.code, refused, key))
                out.append(last)
    return out


def _kind(
    code: ErrorCode | None, refused: dict[tuple[int, str, str], int], key: tuple[int, str, str]
) -> Kind:
    if code is ErrorCode.RATE_LIMIT and refused.get(key, 0) > 0:
        refused[key] -= 1  # the limiter's or the bulkhead's refusal just before it
        return "limited"
    if code is None:
        return "answered"
    if code is ErrorCode.RATE_LIMIT:
        return "rate_limited"
    return "failed" if code in SERVICE_FAILURES else "answered"


def timeline(
    run: RunEvents, baseline: RunEvents | None = None, span_s: float | None = None
) -> TimelineJson | None:
    """The run's series over [0, span_s] (default: its last event, or its baseline's);
    None when it has no service and no breaker ever moved (nothing to chart)."""
    changes = [(t, e) for t, e in run.events if isinstance(e, BreakerChange)]
    if not run.services and not changes:
        return None
    if span_s is None:
        span_s = max(run.last_at, baseline.last_at if baseline else 0.0)
    width = bucket_width(span_s)
    n = max(1, math.ceil(span_s / width - 1e-9))
    grid = _Grid(width, n)
    services = _services(run, grid, span_s)
    if baseline is not None:
        base = _calls(attempts(baseline.events), baseline.tool_services, grid)
        for name, series in services.items():
            series["baseline_calls"] = base.get(name, [0] * n)
    return {
        "bucket_s": width,
        "buckets": n,
        "span_s": round(span_s, 6),
        "services": services,
        "breakers": _breakers(run, changes, span_s),
    }


@dataclass(frozen=True, slots=True)
class _Grid:
    width: float
    n: int

    def index(self, at: float) -> int:
        return min(self.n - 1, max(0, int(at / self.width)))

    def overlaps(self, i: int, start: float, end: float) -> bool:
        return start < (i + 1) * self.width and end > i * self.width


def _calls(
    found: Iterable[Attempt], tool_services: Mapping[str, str], grid: _Grid
) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for a in found:
        service = tool_services.get(a.tool)
        if service is not None and a.kind in REACHED:
            out.setdefault(service, [0] * grid.n)[grid.index(a.at)] += 1
    return out


def _services(run: RunEvents, grid: _Grid, span_s: float) -> dict[str, ServiceSeries]:
    n = grid.n
    out: dict[str, ServiceSeries] = {}
    for name, windows in run.services.items():
        shown = [[s, min(e, span_s)] for s, e in sorted(windows) if s < span_s]
        out[name] = {
            "calls": [0] * n,
            "answered": [0] * n,
            "rate_limited": [0] * n,
            "failed": [0] * n,
            "shed": [0] * n,
            "down": [any(grid.overlaps(i, s, e) for s, e in shown) for i in range(n)],
            "outages": shown,
        }
    for a in attempts(run.events):
        series = out.get(run.tool_services.get(a.tool, ""))
        if series is None:
            continue
        i = grid.index(a.at)
        series["calls" if a.kind in REACHED else "shed"][i] += 1
        if a.kind in ("answered", "rate_limited", "failed"):
            series[a.kind][i] += 1
    return out


def _breakers(
    run: RunEvents, changes: Sequence[tuple[int, BreakerChange]], span_s: float
) -> list[BreakerSeries]:
    by_key: dict[tuple[str, str, str | None], list[tuple[int, BreakerChange]]] = {}
    for trial, e in changes:
        by_key.setdefault((e.agent, e.tool, e.pattern), []).append((trial, e))
    ends = _trial_ends(run.events)
    out: list[BreakerSeries] = []
    for (agent, tool, pattern), moves in sorted(by_key.items(), key=lambda kv: _sort_key(kv[0])):
        scopes = run.model_breaker_scope if tool == "model" else run.tool_breaker_scope
        scope = scopes.get(agent, "trial")
        if scope == "run":
            intervals = _intervals([e for _, e in moves], 0.0, span_s)
        else:
            intervals = []
            for trial in sorted({t for t, _ in moves}):
                mine = [e for t, e in moves if t == trial]
                end = max(ends.get((trial, agent), 0.0), mine[-1].at)
                for iv in _intervals(mine, mine[0].at, end):
                    intervals.append({**iv, "trial": trial})
        out.append({"agent": agent, "tool": tool, "pattern": pattern, "scope": scope,
                    "transitions": len(moves), "intervals": intervals})  # fmt: skip
    return out


def _sort_key(key: tuple[str, str, str | None]) -> tuple[str, str, str]:
    return key[0], key[1], key[2] or ""


def _trial_ends(events: Iterable[tuple[int, Event]]) -> dict[tuple[int, str], float]:
    """Each agent's last stamped event in each trial: when its trial's breakers ended."""
    ends: dict[tuple[int, str], float] = {}
    for trial, e in events:
        at, agent = getattr(e, "at", None), getattr(e, "agent", None)
        if isinstance(at, float | int) and isinstance(agent, str):
            key = (trial, agent)
            ends[key] = max(ends.get(key, 0.0), float(at))
    return ends


def _intervals(moves: Sequence[BreakerChange], start: float, end: float) -> list[Interval]:
    """The states between `start` and `end` the transitions `moves` (in order) went
    through, starting in the first one's `from` state."""
    out: list[Interval] = []
    state, since = moves[0].frm, start
    for e in sorted(moves, key=lambda m: m.at):
        if e.at > since:
            out.append({"state": state, "start_s": round(since, 6), "end_s": round(e.at, 6)})
        state, since = e.to, max(since, e.at)
    if end > since:
        out.append({"state": state, "start_s": round(since, 6), "end_s": round(end, 6)})
    return out
