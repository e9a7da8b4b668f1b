"""The done rule: a trial is over when every terminal agent's result to the runner and
everything in their provenance arrived, whatever the order."""

from __future__ import annotations

import itertools

from errorflow.protocol.envelope import Envelope, Kind
from errorflow.runtime.trial_tracker import TrialState, TrialTracker

_seq = itertools.count()


def msg(
    mid: str,
    sender: str,
    recipient: str,
    derived_from: tuple[str, ...] = (),
    *,
    trial: int = 0,
    kind: Kind = Kind.RESULT,
    round_: int | None = None,
) -> Envelope:
    return Envelope(
        payload={} if round_ is None else {"round": round_},
        id=mid,
        run_id="r",
        trial=trial,
        seq=next(_seq),
        sender=sender,
        recipient=recipient,
        kind=kind,
        trace_id="t",
        derived_from=list(derived_from),
    )


def diamond(trial: int = 0) -> list[Envelope]:
    """runner → researcher, which feeds writer and critic; both report to the runner."""
    return [
        msg(f"task{trial}", "runner", "researcher", trial=trial, kind=Kind.TASK),
        msg(f"r{trial}", "researcher", "writer", (f"task{trial}",), trial=trial),
        msg(f"r{trial}b", "researcher", "critic", (f"task{trial}",), trial=trial),
        msg(f"w{trial}", "writer", "runner", (f"r{trial}",), trial=trial),
        msg(f"c{trial}", "critic", "runner", (f"r{trial}b",), trial=trial),
    ]


TERMINALS = ("writer", "critic")


def test_done_only_when_every_terminal_and_all_provenance_arrived() -> None:
    tracker = TrialTracker(TERMINALS)
    task, r, rb, w, c = diamond()
    assert [tracker.add(m) for m in (task, r, rb, w)] == [False] * 4  # critic missing
    assert tracker.add(c) is True
    assert tracker.is_done(0)
    assert [m.id for m in tracker.messages(0)] == ["task0", "r0", "r0b", "w0", "c0"]


def test_missing_provenance_holds_the_trial_open() -> None:
    tracker = TrialTracker(TERMINALS)
    task, r, rb, w, c = diamond()
    for m in (task, rb, w, c):  # both finals in, but the writer's input `r0` is not
        assert tracker.add(m) is False
    assert not tracker.is_done(0)
    assert tracker.add(r) is True


def test_order_does_not_matter() -> None:
    for order in itertools.permutations(diamond()):
        tracker = TrialTracker(TERMINALS)
        done = [tracker.add(m) for m in order]
        assert done[-1] is True and not any(done[:-1]), [m.id for m in order]


def test_revision_rounds_count_only_when_their_messages_are_in() -> None:
    """writer → reviewer → (revise) writer → reviewer → runner: the reviewer's final
    answer names the last round; every earlier round must be in too."""
    tracker = TrialTracker(["reviewer"])
    rounds = [  # each round's messages say their round, as agents' do
        msg("task", "runner", "writer", kind=Kind.TASK),
        msg("draft1", "writer", "reviewer", ("task",), round_=0),
        msg("revise1", "reviewer", "writer", ("draft1",), kind=Kind.TASK, round_=1),
        msg("draft2", "writer", "reviewer", ("revise1", "task"), round_=1),
        msg("final", "reviewer", "runner", ("draft2",), round_=1),
    ]
    # the final answer overtakes the second round: not done until draft2 and revise1
    for m in (rounds[0], rounds[1], rounds[4]):
        assert tracker.add(m) is False
    assert tracker.add(rounds[3]) is False  # draft2 still names revise1
    assert tracker.add(rounds[2]) is True


def test_late_copies_are_inert() -> None:
    tracker = TrialTracker(TERMINALS)
    msgs = diamond()
    for m in msgs:
        tracker.add(m)
    assert tracker.add(msgs[3]) is True  # a copy already held changes nothing
    assert len(tracker.messages(0)) == 5
    state = tracker.close(0)
    assert [m.id for m in state.messages] == ["task0", "r0", "r0b", "w0", "c0"]
    assert state.finals == {"writer", "critic"}
    assert tracker.add(msgs[3]) is False  # a late copy after scoring
    assert tracker.is_closed(0) and not tracker.is_done(0) and tracker.messages(0) == []


def test_trials_are_independent() -> None:
    tracker = TrialTracker(TERMINALS)
    for m in diamond(1)[:-1] + diamond(2):
        tracker.add(m)
    assert tracker.is_done(2) and not tracker.is_done(1)
    assert tracker.open_trials == [1, 2]
    tracker.close(7)  # a trial never seen (resumed from the store): closed all the same
    assert tracker.add(msg("x", "writer", "runner", trial=7)) is False


def test_no_known_terminals_means_never_done() -> None:
    """An attached TUI without a scenario does not know the terminals yet."""
    tracker = TrialTracker()
    assert tracker.add(msg("w", "writer", "runner")) is False
    tracker.terminals = frozenset({"writer"})
    assert tracker.is_done(0)


def test_a_result_that_does_not_go_to_the_runner_is_not_final() -> None:
    state = TrialState()
    state.add(msg("a", "writer", "critic"))
    assert state.finals == set()
    assert not state.is_done(frozenset({"writer"}))


# -- a restarted agent: its repeats, and what it lost ----------------------------------


def test_a_restarted_agents_repeat_of_a_message_held_is_a_copy() -> None:
    """A new id, but the same sender, recipient, kind and round as a message held: the
    recipient acted on the first, and the trial counts it (and its costs) once."""
    tracker = TrialTracker(["writer"])
    task, first = msg("t", "runner", "researcher", kind=Kind.TASK), msg("a", "researcher", "writer")
    for m in (task, first):
        tracker.add(m)
    assert tracker.add(msg("a2", "researcher", "writer")) is False
    assert tracker.add(msg("b", "researcher", "writer", round_=1)) is False  # another round
    assert [m.id for m in tracker.messages(0)] == ["t", "a", "b"]


def test_a_restarted_agent_lost_the_inputs_of_the_rounds_it_had_not_answered() -> None:
    task, r, rb, w, _c = diamond()
    tracker = TrialTracker(TERMINALS)
    for m in (task, r, rb):  # the writer got r0 and died before answering
        tracker.add(m)
    assert tracker.lost_inputs("writer", frozenset({"runner"})) == [r]
    assert tracker.lost_inputs("critic", frozenset({"runner"})) == [rb]
    assert tracker.lost_inputs("researcher", frozenset({"writer", "critic"})) == []
    tracker.add(w)
    assert tracker.lost_inputs("writer", frozenset({"runner"})) == []


def test_a_result_to_only_some_of_its_targets_leaves_the_round_unanswered() -> None:
    task, r, _rb, _w, _c = diamond()
    tracker = TrialTracker(TERMINALS)
    for m in (task, r):  # the researcher died between its two sends
        tracker.add(m)
    assert tracker.lost_inputs("researcher", frozenset({"writer", "critic"})) == [task]


def test_a_lost_revision_comes_with_round_0s_inputs() -> None:
    """A revision is answered from the round-0 inputs a restarted writer no longer has."""
    tracker = TrialTracker(["reviewer"])
    task = msg("task", "runner", "writer", kind=Kind.TASK)
    draft = msg("draft1", "writer", "reviewer", ("task",), round_=0)
    revise = msg("revise1", "reviewer", "writer", ("draft1",), kind=Kind.TASK, round_=1)
    for m in (task, draft, revise):
        tracker.add(m)
    assert tracker.lost_inputs("writer", frozenset({"reviewer"})) == [task, revise]
    assert tracker.lost_inputs("reviewer", frozenset({"runner"})) == []  # sent it back
    tracker.add(msg("draft2", "writer", "reviewer", ("revise1", "task"), round_=1))
    assert tracker.lost_inputs("writer", frozenset({"reviewer"})) == []
    assert [m.id for m in tracker.lost_inputs("reviewer", frozenset({"runner"}))] == ["draft2"]


def test_closed_trials_lose_nothing() -> None:
    tracker = TrialTracker(TERMINALS)
    task, r, *_ = diamond()
    tracker.add(task)
    tracker.add(r)
    tracker.close(0)
    assert tracker.lost_inputs("writer", frozenset({"runner"})) == []
