"""Partial credit per fact and the `recovered` success (errorflow.scoring.credit): what
the final answer did with each fact, and whether a fault struck the trial."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from errorflow import api
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.reports.tables import credit_lines
from errorflow.runtime.work_wire import score_doc, score_of
from errorflow.scoring.credit import Credit, credit_counts, fact_credit
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.score_table import in_trial_order
from errorflow.scoring.summary import summarize
from errorflow.store.readers import load_scores


class _Truth:
    values: ClassVar[dict[str, int]] = {"rev": 1200, "cost": 700, "days.mon": 100}

    def is_true(self, key: str, value: object) -> bool:
        return self.values.get(key) == value


def _answer(*claims: tuple[str, object, bool]) -> FinalAnswer:
    return FinalAnswer(claims=[Claim(k, v, certain=c) for k, v, c in claims])


def test_each_fact_is_right_wrong_or_abstained_over_the_final_answers() -> None:
    one = _answer(("rev", 1200, True), ("cost", 999, True), ("days.mon", 100, False))
    other = _answer(("rev", 1200, True), ("cost", 700, True))
    credit = fact_credit([one, other], _Truth())
    # a fact stated falsely anywhere is wrong, even if another final states it right
    assert credit == {"rev": Credit.RIGHT, "cost": Credit.WRONG, "days.mon": Credit.ABSTAINED}
    assert fact_credit([], _Truth()) == dict.fromkeys(_Truth.values, Credit.ABSTAINED)


def test_counts_per_fact_add_up_over_trials() -> None:
    trials = [{"rev": "right", "cost": "wrong"}, {"rev": "abstained", "cost": "wrong"}]
    assert credit_counts(trials) == {
        "rev": {"right": 1, "wrong": 0, "abstained": 1},
        "cost": {"right": 0, "wrong": 2, "abstained": 0},
    }


def test_a_success_a_fault_struck_is_recovered_and_travels_between_processes() -> None:
    score = TrialScore(3, Outcome.SUCCESS, 0, credit={"rev": "right"}, struck=True)
    assert score.recovered
    back = score_of(score_doc(score))
    assert back.recovered and back.credit == {"rev": "right"}
    assert not TrialScore(3, Outcome.CONTAINED, 0, struck=True).recovered
    assert not TrialScore(3, Outcome.SUCCESS, 0, struck=False).recovered


RETRIED: dict[str, Any] = {
    "name": "retried",
    "seed": 5,
    "trials": 40,
    "world": {"metrics": {"rev.q1": 1200, "cost.q1": 700}},
    "tools": {"kpi": {"kind": "metric_store", "faults": [{"kind": "transient", "p": 0.4}]}},
    "agents": {
        "analyst": {"role": "researcher", "tools": ["kpi"], "sends_to": ["writer"]},
        "writer": {"role": "writer"},
    },
    "task": {
        "prompt": "Q1 revenue and cost?",
        "needs": [
            {"id": "rev", "tool": "kpi", "wording": "Q1 revenue", "value": "rev.q1"},
            {"id": "cost", "tool": "kpi", "wording": "Q1 cost", "value": "cost.q1"},
        ],
    },
}


def test_a_run_counts_its_recovered_successes_and_credits_each_fact() -> None:
    """Transient faults a retry gets past: those successes are recovered, the others
    untouched; every fact's counts add up to the trials with a final answer."""
    result = api.run(api.load(RETRIED), propagation="explicit")
    metrics = result.summary["metrics"]
    fired = result.raw.to_json()["tool_faults"]["tools.kpi.faults[0]"]["fired"]
    successes = result.outcomes["success"]
    assert 0 < metrics["recovered"] <= min(fired, successes), (metrics, fired)
    assert metrics["recovered"] == sum(s.recovered for s in result.raw.scores)
    credit = metrics["credit"]
    assert set(credit) == {"rev", "cost"}
    assert all(sum(c.values()) == 40 for c in credit.values())
    assert all(c["right"] >= successes for c in credit.values())
    clean = api.run(api.override(api.load(RETRIED), {"tools.kpi.faults": []}))
    assert clean.summary["metrics"]["recovered"] == 0


def test_the_run_text_says_how_many_successes_recovered_and_which_facts_missed() -> None:
    data: Any = {
        "outcomes": {"success": 14},
        "metrics": {
            "recovered": 5,
            "credit": {
                "rev": {"right": 20, "wrong": 0, "abstained": 0},
                "cost": {"right": 14, "wrong": 4, "abstained": 2},
            },
        },
    }
    lines = credit_lines(data)
    assert lines[0].startswith("recovered: 5 of 14 successes had a fault strike them")
    assert lines[1] == (
        "per fact, right/wrong/abstained of 20 trials: cost 14/4/2; 1 other(s) right in every trial"
    )


def test_the_store_keeps_credit_and_struck_so_a_resumed_run_counts_every_trial(
    tmp_path: Path,
) -> None:
    """A resumed run (and a report) summarises the trials read back from the store:
    they come back with their partial credit and whether a fault struck them."""
    db = tmp_path / "runs.db"
    result = api.run(api.load(RETRIED), propagation="explicit", db=db)
    stored = load_scores(db, result.run_id, include_bus_faults=True)
    ran = {s.trial: s for s in result.raw.scores}
    assert {t: (s.credit, s.struck) for t, s in stored.items()} == {
        t: (s.credit, s.struck) for t, s in ran.items()
    }
    again = summarize(in_trial_order(stored))["metrics"]
    assert again["recovered"] == result.summary["metrics"]["recovered"] > 0
    assert again["credit"] == result.summary["metrics"]["credit"]
