"""The timeline's series from hand-built events: attempts rebuilt from tool calls,
retries and refusals, bucketed; breaker intervals from transitions; the baseline."""

from __future__ import annotations

import pytest

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.events import (
    BreakerChange,
    CallRefused,
    Event,
    GuardBlock,
    RetryScheduled,
    ToolCallEvent,
)
from errorflow.reports.timeline import (
    RunEvents,
    Scope,
    attempts,
    bucket_width,
    timeline,
)
from errorflow.reports.timeline_table import periods, timeline_rows

A, T = "researcher", "search"


def call(at: float, n: int, code: ErrorCode | None = None, cid: str = "c") -> ToolCallEvent:
    return ToolCallEvent(
        agent=A, tool=T, call_id=cid, args={}, ok=code is None, code=code, attempts=n, at=at
    )


def retry(at: float, n: int, code: ErrorCode = ErrorCode.TRANSIENT) -> RetryScheduled:
    return RetryScheduled(agent=A, tool=T, attempt=n, code=code, delay_s=0.5, at=at)


def move(at: float, frm: str, to: str, agent: str = A) -> BreakerChange:
    return BreakerChange(agent=agent, tool=T, frm=frm, to=to, at=at, reason="test")


def run(
    events: list[tuple[int, Event]],
    services: dict[str, list[tuple[float, float]]] | None = None,
    tool_breaker_scope: dict[str, Scope] | None = None,
) -> RunEvents:
    return RunEvents(
        events=events,
        services=services or {},
        tool_services={T: "api"},
        tool_breaker_scope=tool_breaker_scope or {},
    )


@pytest.mark.parametrize(
    ("span", "width"),
    [(0.0, 1.0), (60.0, 1.0), (61.0, 2.0), (178.2, 5.0), (20.9, 0.5), (0.27, 0.005), (3e4, 500.0)],
)
def test_bucket_width_is_round_and_gives_at_most_60_buckets(span: float, width: float) -> None:
    assert bucket_width(span) == width


def test_attempts_are_rebuilt_from_calls_retries_and_refusals() -> None:
    events: list[tuple[int, Event]] = [
        (0, retry(1.0, 1)),  # failed, retried
        (0, retry(2.0, 2, ErrorCode.RATE_LIMIT)),  # a 429 from the service, retried
        (0, call(3.0, 3)),  # the third attempt answered
        (1, CallRefused(agent=A, tool=T, by="limiter", at=4.0)),
        (1, retry(4.0, 1, ErrorCode.RATE_LIMIT)),  # the limiter's refusal: never sent
        (1, call(5.0, 2, ErrorCode.TIMEOUT)),  # sent, timed out, not retried
        (2, call(6.0, 0, ErrorCode.CIRCUIT_OPEN)),  # refused by an open circuit
        (2, call(6.5, 0, ErrorCode.REPEATED_CALL_BLOCKED)),  # a guard: not a call, not shed
        (2, GuardBlock(agent=A, tool=T, code=ErrorCode.REPEATED_CALL_BLOCKED, message="x")),
        (3, call(7.0, 1, ErrorCode.EMPTY_RESULT)),  # the service answered, nothing in it
    ]
    got = [(a.trial, a.at, a.kind) for a in attempts(events)]
    assert got == [
        (0, 1.0, "failed"),
        (0, 2.0, "rate_limited"),
        (0, 3.0, "answered"),
        (1, 4.0, "limited"),
        (1, 5.0, "failed"),
        (2, 6.0, "circuit_open"),
        (3, 7.0, "answered"),
    ]


def test_bucket_counts_match_the_events_and_outages_mark_buckets() -> None:
    events: list[tuple[int, Event]] = [
        (0, call(0.5, 1)),
        (1, retry(12.0, 1)),
        (1, call(13.0, 2, ErrorCode.TRANSIENT)),
        (2, call(25.0, 0, ErrorCode.CIRCUIT_OPEN)),
        (3, call(59.9, 1)),
    ]
    tl = timeline(run(events, services={"api": [(10.0, 20.0)], "idle": []}), span_s=60.0)
    assert tl is not None
    assert (tl["bucket_s"], tl["buckets"]) == (1.0, 60)
    s = tl["services"]["api"]
    assert sum(s["calls"]) == 4 and s["calls"][0] == 1 and s["calls"][59] == 1
    assert s["failed"][12] == 1 and s["failed"][13] == 1 and sum(s["failed"]) == 2
    assert s["answered"][0] == 1 and sum(s["answered"]) == 2
    assert s["shed"][25] == 1 and sum(s["shed"]) == 1
    assert [i for i, d in enumerate(s["down"]) if d] == list(range(10, 20))
    assert s["outages"] == [[10.0, 20.0]]
    assert sum(tl["services"]["idle"]["calls"]) == 0  # a lane even without calls
    assert "baseline_calls" not in s


def test_the_baseline_is_bucketed_on_the_runs_axis() -> None:
    events: list[tuple[int, Event]] = [(0, retry(1.0, 1)), (0, retry(1.2, 2)), (0, call(1.5, 3))]
    base: list[tuple[int, Event]] = [(0, call(1.1, 1)), (1, call(130.0, 1))]
    tl = timeline(run(events, services={"api": []}), run(base, services={"api": []}))
    assert tl is not None
    assert (tl["span_s"], tl["bucket_s"], tl["buckets"]) == (130.0, 5.0, 26)  # the longer run
    s = tl["services"]["api"]
    assert s["calls"][0] == 3 and s["baseline_calls"][0] == 1 and s["baseline_calls"][-1] == 1
    assert sum(s["calls"]) / sum(s["baseline_calls"]) == 1.5  # the amplification


def test_run_scoped_breaker_intervals_follow_its_transitions() -> None:
    events: list[tuple[int, Event]] = [
        (3, move(10.0, "closed", "open")),
        (7, move(40.0, "open", "half_open")),
        (7, move(41.0, "half_open", "open")),
        (9, move(71.0, "open", "half_open")),
        (9, move(71.5, "half_open", "closed")),
        (9, call(90.0, 1)),
    ]
    tl = timeline(run(events, tool_breaker_scope={A: "run"}))
    assert tl is not None and tl["services"] == {}
    [b] = tl["breakers"]
    assert (b["agent"], b["tool"], b["scope"], b["transitions"]) == (A, T, "run", 5)
    assert [(i["state"], i["start_s"], i["end_s"]) for i in b["intervals"]] == [
        ("closed", 0.0, 10.0),
        ("open", 10.0, 40.0),
        ("half_open", 40.0, 41.0),
        ("open", 41.0, 71.0),
        ("half_open", 71.0, 71.5),
        ("closed", 71.5, 90.0),
    ]


def test_trial_scoped_breakers_live_one_trial_each() -> None:
    events: list[tuple[int, Event]] = [
        (2, move(5.0, "closed", "open")),
        (2, call(8.0, 0, ErrorCode.CIRCUIT_OPEN)),  # the agent's last event of trial 2
        (4, move(20.0, "closed", "open")),
        (4, move(50.0, "open", "half_open")),
        (4, move(50.5, "half_open", "closed")),
        (4, call(52.0, 1)),
        (5, move(1.0, "closed", "open", agent="other")),  # another agent's breaker
    ]
    tl = timeline(run(events))
    assert tl is not None
    ours, other = sorted(tl["breakers"], key=lambda b: b["agent"] != A)
    assert ours["scope"] == "trial" and other["agent"] == "other"
    assert [(i["trial"], i["state"], i["start_s"], i["end_s"]) for i in ours["intervals"]] == [
        (2, "open", 5.0, 8.0),
        (4, "open", 20.0, 50.0),
        (4, "half_open", 50.0, 50.5),
        (4, "closed", 50.5, 52.0),
    ]


def test_nothing_to_chart_without_services_or_breaker_moves() -> None:
    assert timeline(RunEvents(events=[(0, call(1.0, 1))], tool_services={T: "api"})) is None


def test_the_table_merges_buckets_into_periods() -> None:
    events: list[tuple[int, Event]] = [
        (0, call(0.5, 1)),
        (1, move(30.0, "closed", "open")),
        (1, call(31.0, 0, ErrorCode.CIRCUIT_OPEN)),
        (2, call(59.0, 1)),
    ]
    tl = timeline(run(events, services={"api": [(30.0, 40.0)]}, tool_breaker_scope={A: "run"}))
    assert tl is not None and tl["buckets"] == 59
    assert periods(tl)[:2] == [(0, 5), (5, 10)] and len(periods(tl)) == 12
    rows = timeline_rows(tl)
    assert rows[0] == ["api", "0–5", "1", "1", "0", "0", "0", "-", "-"]
    assert rows[6] == ["api", "30–35", "0", "0", "0", "0", "1", "yes", f"{A}/{T}: open"]
    assert rows[-1][1] == "55–59" and rows[-1][2] == "1"
