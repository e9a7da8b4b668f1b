"""Collecting a trial's inputs: ready once with every expected sender, resends dropped,
revision rounds answered from the round-0 inputs."""

from __future__ import annotations

from typing import Any

from errorflow.agents import inputs as inputs_mod
from errorflow.agents.inputs import (
    InputCollector,
    Ready,
    Rejected,
    round_of,
)
from errorflow.protocol.envelope import Envelope, Kind


def msg(sender: str, trial: int = 0, kind: Kind = Kind.RESULT, **payload: Any) -> Envelope:
    return Envelope(
        run_id="r",
        trial=trial,
        seq=0,
        sender=sender,
        recipient="writer",
        kind=kind,
        trace_id=f"r-{trial}",
        payload=payload,
    )


def test_a_round_is_ready_once_every_expected_sender_has_sent() -> None:
    c = InputCollector(["a", "b"], [], 0)
    first, second = msg("a"), msg("b")
    assert c.accept(first) is None
    assert c.accept(second) == Ready(0, 0, [first, second])


def test_trials_are_collected_separately() -> None:
    c = InputCollector(["a", "b"], [], 0)
    assert c.accept(msg("a", trial=0)) is None
    assert c.accept(msg("b", trial=1)) is None
    ready = c.accept(msg("a", trial=1))
    assert isinstance(ready, Ready) and ready.trial == 1


def test_resends_are_dropped_before_and_after_the_start() -> None:
    c = InputCollector(["a", "b"], [], 0)
    held = msg("a")
    assert c.accept(held) is None
    assert c.accept(msg("a")) is None  # a resend of an input we hold: the first one counts
    ready = c.accept(msg("b"))
    assert isinstance(ready, Ready) and ready.inputs[0] is held
    assert c.accept(msg("b")) is None  # the round already started
    c.finished(0, 0)
    assert c.accept(msg("a")) is None and c.accept(msg("b")) is None  # and finished


def test_a_message_from_an_unexpected_sender_is_rejected() -> None:
    c = InputCollector(["runner"], [], 0)
    assert c.accept(msg("stranger")) == Rejected("unexpected_sender")


def test_a_revision_is_answered_from_the_round_0_inputs() -> None:
    c = InputCollector(["researcher"], ["reviewer"], 1)
    original = msg("researcher")
    assert c.accept(original) == Ready(0, 0, [original])
    revision = msg("reviewer", kind=Kind.TASK, round=1)
    assert c.accept(revision) == Ready(0, 1, [original, revision])
    assert c.accept(revision) is None  # resent revision


def test_a_revision_without_inputs_is_rejected() -> None:
    c = InputCollector(["researcher"], ["reviewer"], 1)
    assert c.accept(msg("reviewer", kind=Kind.TASK, round=1)) == Rejected("revision_without_inputs")


def test_round_0_inputs_are_kept_until_the_last_round() -> None:
    c = InputCollector(["researcher"], ["reviewer"], 2)
    c.accept(msg("researcher"))
    c.finished(0, 0)
    assert isinstance(c.accept(msg("reviewer", kind=Kind.TASK, round=1)), Ready)
    c.finished(0, 1)
    assert isinstance(c.accept(msg("reviewer", kind=Kind.TASK, round=2)), Ready)
    c.finished(0, 2)  # the last round a reviewer can ask for
    assert c.accept(msg("reviewer", kind=Kind.TASK, round=3)) == Rejected("revision_without_inputs")


def test_without_returners_no_round_0_inputs_are_kept() -> None:
    c = InputCollector(["researcher"], [], 0)
    c.accept(msg("researcher"))
    assert c._round0 == {}


def test_the_round_0_window_is_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(inputs_mod, "ROUND0_KEEP", 2)
    c = InputCollector(["researcher"], ["reviewer"], 1)
    for trial in range(3):
        c.accept(msg("researcher", trial=trial))
    assert list(c._round0) == [1, 2]  # the oldest trial's inputs were let go
    assert c.accept(msg("reviewer", trial=0, kind=Kind.TASK, round=1)) == Rejected(
        "revision_without_inputs"
    )


def test_the_started_set_is_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(inputs_mod, "DONE_KEEP", 3)
    monkeypatch.setattr(inputs_mod, "DONE_WINDOW_TRIALS", 1)
    c = InputCollector(["a"], [], 0)
    for trial in range(4):
        c.accept(msg("a", trial=trial))
    assert c._started == {(2, 0), (3, 0)}


def test_the_round_comes_from_the_payload_within_bounds() -> None:
    assert round_of(msg("a")) == 0
    assert round_of(msg("a", round=3)) == 3
    assert round_of(msg("a", round=101)) == 0
    assert round_of(msg("a", round=-1)) == 0
    assert round_of(msg("a", round="2")) == 0


def test_a_managers_round_1_waits_for_every_delegate_with_round_0s_inputs() -> None:
    c = InputCollector(["runner"], [], 1, delegates=["w1", "w2"])
    task = msg("runner", kind=Kind.TASK)
    assert c.accept(task) == Ready(0, 0, [task])
    one, two = msg("w1", round=1), msg("w2", round=1)
    assert c.accept(one) is None
    assert c.accept(msg("w1", round=1)) is None  # a resend of an input held
    assert c.accept(two) == Ready(0, 1, [task, one, two])
    assert c.accept(msg("runner", trial=2, round=1)) == Rejected("unexpected_sender")
    c.finished(0, 0)  # round 0's inputs are kept for round 1
    c.finished(0, 1)
    assert c.accept(msg("w1", trial=1, round=1)) is None
    assert c.accept(msg("w2", trial=1, round=1)) == Rejected("results_without_task")
