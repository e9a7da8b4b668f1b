"""Each trial's time at a model server (errorflow/models/server_time.py): the union of its
requests' spans (two at once count once), a request still there counted up to now,
trials kept apart, and the oldest trials with nothing at a server forgotten past the
limit, never one with a request still there."""

from __future__ import annotations

import pytest

from errorflow.models import server_time
from errorflow.models.server_time import ServerTime
from tests.fake_time import FakeTime

A, B = ("exp", 1), ("exp", 2)


def test_a_request_counts_from_its_slot_to_its_reply() -> None:
    t = FakeTime()
    spans = ServerTime(t.clock)
    assert spans.spent_s(A) == 0.0 and not spans.waiting(A)
    with spans.at_server(A):
        t.now += 3.0
        assert spans.waiting(A) and spans.spent_s(A) == 3.0  # still there: up to now
        t.now += 2.0
    t.now += 10.0  # after the reply: not counted
    assert spans.spent_s(A) == 5.0 and not spans.waiting(A)
    with spans.at_server(A):
        t.now += 1.5
    assert spans.spent_s(A) == 6.5


def test_requests_of_one_trial_at_once_count_once() -> None:
    t = FakeTime()
    spans = ServerTime(t.clock)
    with spans.at_server(A):
        t.now += 1.0
        with spans.at_server(A):  # another agent of the trial, overlapping
            t.now += 2.0
        assert spans.waiting(A)
        t.now += 1.0
    assert spans.spent_s(A) == 4.0  # 1 + 2 + 1, not 1 + 2 + 2 + 1


def test_trials_are_kept_apart_and_a_failed_request_ends_its_span() -> None:
    t = FakeTime()
    spans = ServerTime(t.clock)
    with pytest.raises(TimeoutError), spans.at_server(A):
        t.now += 4.0
        raise TimeoutError
    assert spans.spent_s(A) == 4.0 and not spans.waiting(A)
    assert spans.spent_s(B) == 0.0 and spans.spent_s(("other", 1)) == 0.0


def test_the_oldest_idle_trials_are_forgotten_never_a_waiting_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_time, "REMEMBERED_TRIALS", 3)
    t = FakeTime()
    spans = ServerTime(t.clock)
    waiting = spans.at_server(("exp", 0))
    waiting.__enter__()  # trial 0 stays at the server
    for trial in (1, 2, 3, 4):
        with spans.at_server(("exp", trial)):
            t.now += 1.0
    # 0 is waiting: 1 and 2 went to make room for 3 and 4
    assert spans.waiting(("exp", 0)) and spans.spent_s(("exp", 0)) == 4.0
    assert [spans.spent_s(("exp", n)) for n in (1, 2, 3, 4)] == [0.0, 0.0, 1.0, 1.0]
    waiting.__exit__(None, None, None)
    assert spans.spent_s(("exp", 0)) == 4.0 and not spans.waiting(("exp", 0))
