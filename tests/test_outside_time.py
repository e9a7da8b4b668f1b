"""Each trial's time outside errorflow (errorflow/core/outside_time.py): the union of its
calls' spans (two at once count once), a call still outside counted up to now, trials
kept apart, a call past its bound counted no more, the oldest trials with nothing
outside forgotten past the limit (never one with a call still out); a call is timed for
the trial whose work runs in the context, including tasks it starts, and for none
outside a trial's work. An agent in a process of its own reports its trials' time in its
heartbeat, and the runner adds what each agent told it."""

from __future__ import annotations

import asyncio
import os

import pytest

from errorflow.core import outside_time
from errorflow.core.outside_time import OUTSIDE, OutsideTime, outside_call, working_on
from tests.fake_time import FakeTime

A, B = "run-a-t1", "run-a-t2"


def test_a_call_counts_from_its_slot_to_its_answer() -> None:
    t = FakeTime()
    spans = OutsideTime(t.clock)
    assert spans.spent_s(A) == 0.0 and not spans.waiting(A)
    with spans.span(A):
        t.now += 3.0
        assert spans.waiting(A) and spans.spent_s(A) == 3.0  # still out: up to now
        t.now += 2.0
    t.now += 10.0  # after the answer: not counted
    assert spans.spent_s(A) == 5.0 and not spans.waiting(A)
    with spans.span(A):
        t.now += 1.5
    assert spans.spent_s(A) == 6.5


def test_calls_of_one_trial_at_once_count_once() -> None:
    t = FakeTime()
    spans = OutsideTime(t.clock)
    with spans.span(A):
        t.now += 1.0
        with spans.span(A):  # another agent of the trial, overlapping
            t.now += 2.0
        assert spans.waiting(A)
        t.now += 1.0
    assert spans.spent_s(A) == 4.0  # 1 + 2 + 1, not 1 + 2 + 2 + 1


def test_trials_are_kept_apart_and_a_failed_call_ends_its_span() -> None:
    t = FakeTime()
    spans = OutsideTime(t.clock)
    with pytest.raises(TimeoutError), spans.span(A):
        t.now += 4.0
        raise TimeoutError
    assert spans.spent_s(A) == 4.0 and not spans.waiting(A)
    assert spans.spent_s(B) == 0.0


def test_a_call_past_its_bound_counts_no_more() -> None:
    """A tool call bounded by its timeout whose code will not stop: past the bound it
    counts no more, so the trial timeout runs again."""
    t = FakeTime()
    spans = OutsideTime(t.clock)
    stuck = spans.span(A, bound_s=2.0)
    stuck.__enter__()
    t.now += 1.5
    assert spans.waiting(A) and spans.spent_s(A) == 1.5
    with spans.span(A):  # an unbounded call (a model request) meanwhile
        t.now += 1.0
        assert spans.waiting(A) and spans.spent_s(A) == 2.5
    t.now += 5.0
    assert not spans.waiting(A) and spans.spent_s(A) == 2.5  # the stuck one's bound passed
    stuck.__exit__(None, None, None)
    assert spans.spent_s(A) == 2.5 and not spans.waiting(A)


def test_the_oldest_idle_trials_are_forgotten_never_a_waiting_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(outside_time, "REMEMBERED_TRIALS", 3)
    t = FakeTime()
    spans = OutsideTime(t.clock)
    waiting = spans.span("t0")
    waiting.__enter__()  # trial 0 stays out
    for trial in (1, 2, 3, 4):
        with spans.span(f"t{trial}"):
            t.now += 1.0
    # t0 is waiting: t1 and t2 went to make room for t3 and t4
    assert spans.waiting("t0") and spans.spent_s("t0") == 4.0
    assert [spans.spent_s(f"t{n}") for n in (1, 2, 3, 4)] == [0.0, 0.0, 1.0, 1.0]
    waiting.__exit__(None, None, None)
    assert spans.spent_s("t0") == 4.0 and not spans.waiting("t0")


async def test_a_call_is_timed_for_the_trial_whose_work_makes_it() -> None:
    seen: dict[str, bool] = {}

    async def call(name: str) -> None:
        with outside_call():
            seen[name] = OUTSIDE.waiting("trace-x-t7")
            await asyncio.sleep(0.01)

    with working_on("trace-x-t7"):
        await call("awaited")
        await asyncio.create_task(call("in a task it started"))
    await call("outside any trial's work")
    assert seen == {
        "awaited": True,
        "in a task it started": True,
        "outside any trial's work": False,
    }
    assert OUTSIDE.spent_s("trace-x-t7") >= 0.02 and not OUTSIDE.waiting("trace-x-t7")


def test_a_heartbeat_reports_the_trials_outside_now_and_lately() -> None:
    t = FakeTime()
    spans = OutsideTime(t.clock)
    with spans.span("old"):
        t.now += 1.0
    t.now += outside_time.REPORT_WINDOW_S + 1  # ended long ago: not reported
    with spans.span("ended"):
        t.now += 2.0
    out = spans.span("out")
    out.__enter__()
    t.now += 0.5
    assert spans.report() == [("out", 0.5, True), ("ended", 2.0, False)]
    t.now += 10.0  # still out, however long ago it changed
    assert spans.report() == [("out", 10.5, True)]
    out.__exit__(None, None, None)
    assert spans.report() == [("out", 10.5, False)]


def test_a_heartbeat_reports_the_most_recent_trials_up_to_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(outside_time, "REPORTED_TRIALS", 2)
    t = FakeTime()
    spans = OutsideTime(t.clock)
    for trial in range(4):
        with spans.span(f"t{trial}"):
            t.now += 0.5
    assert [trace for trace, _, _ in spans.report()] == ["t3", "t2"]


def test_what_agents_elsewhere_told_adds_up_and_their_waits_expire() -> None:
    t = FakeTime()
    spans = OutsideTime(t.clock)
    spans.told("researcher", A, 3.0, waiting=False, for_s=2.5)
    assert spans.spent_s(A) == 3.0 and not spans.waiting(A)
    spans.told("writer", A, 1.0, waiting=True, for_s=2.5)
    assert spans.spent_s(A) == 4.0 and spans.waiting(A)
    with spans.span(A):  # and one of this process's own
        t.now += 2.0
    assert spans.spent_s(A) == 6.0 and spans.waiting(A)
    t.now += 0.6  # no heartbeat of the writer's since: its wait is over, as far as we know
    assert not spans.waiting(A)
    spans.told("writer", A, 1.5, waiting=False, for_s=2.5)  # a later word replaces the last
    assert spans.spent_s(A) == 6.5 and spans.spent_s(B) == 0.0


def test_a_trial_an_agent_elsewhere_waits_on_is_not_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(outside_time, "REMEMBERED_TRIALS", 2)
    t = FakeTime()
    spans = OutsideTime(t.clock)
    spans.told("clerk", "t0", 1.0, waiting=True, for_s=10.0)
    for trial in (1, 2, 3):
        spans.told("clerk", f"t{trial}", 1.0, waiting=False, for_s=10.0)
    assert spans.waiting("t0") and spans.spent_s("t0") == 1.0
    assert [spans.spent_s(f"t{n}") for n in (1, 2, 3)] == [0.0, 0.0, 1.0]


def test_one_process_reports_once_however_many_of_its_agents_say_it() -> None:
    """Every agent of a process reports the process's calls: a report replaces the
    process's last one, so two agents saying the same 2 s count 2 s, not 4."""
    t = FakeTime()
    spans = OutsideTime(t.clock)
    for _agent in ("researcher", "writer"):
        spans.told("process-1", A, 2.0, waiting=False, for_s=2.5)
    assert spans.spent_s(A) == 2.0
    spans.told("process-2", A, 1.0, waiting=False, for_s=2.5)  # another process's
    assert spans.spent_s(A) == 3.0


def test_a_trial_scored_is_forgotten_and_its_trace_id_starts_again_from_nothing() -> None:
    t = FakeTime()
    spans = OutsideTime(t.clock)
    with spans.span(A):
        t.now += 20.0
    spans.told("process-1", A, 5.0, waiting=True, for_s=2.5)
    spans.forget(A)
    assert spans.spent_s(A) == 0.0 and not spans.waiting(A)


def test_the_process_token_tells_a_forked_child_apart() -> None:
    assert outside_time.process_token().endswith(f"-{os.getpid()}")
