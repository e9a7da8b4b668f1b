"""The score table gives back the scores put in (without labels), in trial order, and a
summary made from it is the summary of the scores themselves, to the last bit."""

from __future__ import annotations

import random

import pytest

from errorflow.core.costs import Costs
from errorflow.scoring.score import (
    Label,
    MessageLabel,
    Outcome,
    TrialScore,
)
from errorflow.scoring.score_table import ScoreTable, in_trial_order, score_map
from errorflow.scoring.summary import summarize


def some_scores(n: int, seed: int = 7) -> list[TrialScore]:
    rng = random.Random(seed)
    out = []
    for t in range(n):
        outcome = rng.choice(list(Outcome))
        costs = Costs(
            backend_calls=rng.randint(0, 9),
            model_calls=rng.randint(1, 5),
            input_tokens=rng.randint(100, 900),
            output_tokens=rng.randint(10, 90),
            retries=rng.randint(0, 3),
            sim_seconds=rng.random() * 3,  # not an integer: the order of sums matters
            cache_read_tokens=rng.choice([0.0, 12.5]),
        )
        policy = {"writer": {"retry": float(rng.randint(0, 2))}} if rng.random() < 0.3 else {}
        reason = "no final result" if outcome is Outcome.BUS_FAULT else ""
        label = MessageLabel("m", "writer", Label.CLEAN, "ok", touched=False)
        score = TrialScore(t, outcome, rng.randint(0, 4), [label], costs, reason, policy)
        score.credit = {"a": rng.choice(["right", "wrong"]), "b": "abstained"}
        score.struck = rng.random() < 0.5
        out.append(score)
    return out


def test_a_score_comes_back_as_it_went_in_without_its_labels() -> None:
    scores = some_scores(50)
    table = ScoreTable()
    for s in reversed(scores):  # trials end in any order
        table[s.trial] = s
    assert len(table) == 50 and list(table) == list(range(50))
    for s in scores:
        back = table[s.trial]
        assert back.labels == []
        assert (back.outcome, back.depth, back.costs, back.reason, back.policy) == (
            s.outcome, s.depth, s.costs, s.reason, s.policy,
        )  # fmt: skip
        assert (back.credit, back.struck) == (s.credit, s.struck)


def test_each_trial_keeps_its_own_reason_though_reasons_are_stored_once() -> None:
    reasons = ["failure reported", "", "false claim(s) stated as certain: papers"]
    scores = some_scores(30)
    table = ScoreTable()
    for s in scores:
        table[s.trial] = TrialScore(s.trial, s.outcome, s.depth, [], s.costs,
                                    reasons[s.trial % 3], s.policy)  # fmt: skip
    assert [table[t].reason for t in range(30)] == [reasons[t % 3] for t in range(30)]
    first = scores[0]
    table[0] = TrialScore(0, first.outcome, first.depth, [], first.costs, "", first.policy)
    table[1] = TrialScore(1, first.outcome, first.depth, [], first.costs, "new", first.policy)
    assert (table[0].reason, table[1].reason, table[3].reason) == ("", "new", reasons[0])
    del table[3]
    table[3] = TrialScore(3, first.outcome, first.depth, [], first.costs, "", first.policy)
    assert table[3].reason == ""


def test_missing_trials_are_missing() -> None:
    table = ScoreTable({3: some_scores(4)[3]})
    assert 3 in table and 2 not in table and 99 not in table and "3" not in table
    with pytest.raises(KeyError):
        table[2]
    with pytest.raises(KeyError):
        table[-1]
    del table[3]
    assert len(table) == 0 and 3 not in table
    with pytest.raises(KeyError):  # a score filed under another trial's number
        table[5] = some_scores(1)[0]


def test_the_summary_of_the_table_is_the_summary_of_the_scores() -> None:
    scores = some_scores(3000)
    table = ScoreTable()
    order = list(range(3000))
    random.Random(1).shuffle(order)
    for t in order:
        table[t] = scores[t]
    assert summarize(table.ordered()) == summarize(scores)
    skip = {Outcome.BUS_FAULT, Outcome.INFRA_FAULT}
    costs = [s.costs for s in scores if s.outcome not in skip]
    assert list(table.ordered().costs(skip)) == costs and 0 < len(costs) < 3000
    assert table.ordered() == [table[t] for t in range(3000)]
    assert table.ordered()[10:12] == [table[10], table[11]]
    ordered = table.ordered()
    del table[next(t for t in range(3000) if scores[t].outcome not in skip)]
    assert list(ordered.costs(skip)) == costs[1:]  # a trial deleted since: no costs


def test_a_run_without_kept_messages_keeps_a_table_and_one_with_them_a_dict() -> None:
    assert isinstance(score_map(keep_labels=False), ScoreTable)
    kept = score_map(keep_labels=True)
    assert isinstance(kept, dict)
    s = some_scores(3)
    kept.update({2: s[2], 0: s[0]})
    assert [x.trial for x in in_trial_order(kept)] == [0, 2]
    assert in_trial_order(kept)[0].labels  # a dict keeps the labels


def test_room_made_for_the_run_up_front_and_more_when_needed() -> None:
    scores = some_scores(16)
    table = ScoreTable(capacity=10)
    assert len(table) == 0 and list(table) == [] and 0 not in table
    table[9] = scores[9]
    table[15] = scores[15]  # beyond the capacity given: room is made
    assert list(table) == [9, 15] and table[15].costs == scores[15].costs
