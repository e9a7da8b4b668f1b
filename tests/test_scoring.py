"""Scoring on hand-built message sequences, one per label and outcome."""

from __future__ import annotations

import itertools
import math
from typing import Any

from errorflow.core.costs import Costs
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.envelope import (
    Envelope,
    Kind,
    Status,
    WireError,
)
from errorflow.scoring.score import (
    Label,
    Outcome,
    Truth,
    label_message,
    score_trial,
)
from tests.conftest import scenario

S = scenario("contamination")
TRUTH = Truth(S)
PAPERS = sorted(TRUTH.values["papers"])
_seq = iter(range(10_000))


def msg(
    sender: str,
    recipient: str,
    *,
    claims: list[dict[str, Any]] | None = None,
    status: Status = Status.OK,
    confidence: float = 1.0,
    errors: list[WireError] | None = None,
    failures: list[str] | None = None,
    derived: list[Envelope] | None = None,
    flags: list[str] | None = None,
    unresolved: list[str] | None = None,
    abstained: bool = False,
) -> Envelope:
    return Envelope(
        run_id="r",
        trial=0,
        seq=next(_seq),
        sender=sender,
        recipient=recipient,
        kind=Kind.RESULT,
        trace_id="t",
        status=status,
        confidence=confidence,
        errors=errors or [],
        derived_from=[d.id for d in derived or []],
        payload={
            "answer": {
                "claims": claims or [],
                "flags": flags or [],
                "unresolved": unresolved or [],
                "abstained": abstained,
                "text": "",
            },
            "trace": {"failures": failures or [], "costs": {"backend_calls": 1}},
        },
    )


def err(origin: str, hops: int = 0) -> WireError:
    return WireError(
        code=ErrorCode.PERMISSION_DENIED, tool="search_papers", origin=origin, hops=hops
    )


def test_truth_knows_the_papers() -> None:
    assert PAPERS == ["bahdanau2015", "shaw2018", "vaswani2017"]
    assert TRUTH.is_true("papers", list(reversed(PAPERS)))
    assert not TRUTH.is_true("papers", [])
    assert not TRUTH.is_true("nope", PAPERS)


def test_clean_success() -> None:
    r = msg("researcher", "writer", claims=[{"key": "papers", "value": PAPERS}])
    w = msg("writer", "runner", claims=[{"key": "papers", "value": PAPERS}], derived=[r])
    score = score_trial(S, TRUTH, 0, [r, w])
    assert score.outcome is Outcome.SUCCESS
    assert [lb.label for lb in score.labels] == [Label.CLEAN, Label.CLEAN]


def honest_failed_researcher() -> Envelope:
    """The explicit researcher whose search failed: says so, claims nothing."""
    return msg(
        "researcher",
        "writer",
        status=Status.FAILED,
        confidence=0.4,
        errors=[err("researcher")],
        failures=["permission_denied"],
        unresolved=["papers"],
    )


def test_contained_failure_is_not_mistaken_for_success() -> None:
    r = honest_failed_researcher()
    w = msg(
        "writer",
        "runner",
        status=Status.FAILED,
        confidence=0.2,
        abstained=True,
        errors=[err("researcher", 1)],
        flags=["papers: upstream failure"],
        derived=[r],
    )
    score = score_trial(S, TRUTH, 0, [r, w])
    assert score.outcome is Outcome.CONTAINED
    assert {lb.sender: lb.label for lb in score.labels} == {
        "researcher": Label.CONTAINED,
        "writer": Label.CONTAINED,
    }
    assert score.depth == 0


def test_confident_wrong_report_is_not_mistaken_for_containment() -> None:
    # Upstream said so honestly, but the writer still states invented papers as certain.
    r = honest_failed_researcher()
    w = msg(
        "writer",
        "runner",
        status=Status.PARTIAL_FAILURE,
        confidence=0.4,
        errors=[err("researcher", 1)],
        claims=[{"key": "papers", "value": ["fabricated-1"], "certain": True}],
        derived=[r],
    )
    score = score_trial(S, TRUTH, 0, [r, w])
    assert score.outcome is Outcome.CONTAMINATED
    labels = {lb.sender: lb for lb in score.labels}
    assert labels["writer"].label is Label.CONTAMINATED
    assert "false claim" in labels["writer"].reason
    assert labels["researcher"].label is Label.CONTAINED
    assert score.depth == 1


def test_swallowed_failure_contaminates_the_whole_chain() -> None:
    # implicit: "no papers" stated as a fact, then a fabricated report on top of it
    r = msg(
        "researcher",
        "writer",
        claims=[{"key": "papers", "value": []}],
        failures=["permission_denied"],
    )
    w = msg("writer", "runner", claims=[{"key": "papers", "value": ["x", "y"]}], derived=[r])
    score = score_trial(S, TRUTH, 0, [r, w])
    assert score.outcome is Outcome.CONTAMINATED
    assert score.depth == 2


def test_silently_dropped_failure_without_false_claims_is_contamination() -> None:
    r = msg("researcher", "writer", failures=["transient"])  # says ok, claims nothing
    label = label_message(r, TRUTH, touched=True)
    assert label.label is Label.CONTAMINATED and "dropped" in label.reason
    # the same message untouched by any failure is merely clean (and incomplete)
    assert label_message(r, TRUTH, touched=False).label is Label.CLEAN


def test_uncertain_claims_are_honest() -> None:
    r = msg(
        "researcher",
        "writer",
        claims=[{"key": "papers", "value": [], "certain": False}],
        failures=["empty_result"],
    )
    assert label_message(r, TRUTH, touched=True).label is Label.CONTAINED


def test_missing_final_result_is_a_bus_fault() -> None:
    r = msg("researcher", "writer", claims=[{"key": "papers", "value": PAPERS}])
    assert score_trial(S, TRUTH, 0, [r]).outcome is Outcome.BUS_FAULT


def test_costs_are_summed_once_per_sender() -> None:
    r = msg("researcher", "writer", claims=[{"key": "papers", "value": PAPERS}])
    w = msg("writer", "runner", claims=[{"key": "papers", "value": PAPERS}], derived=[r])
    assert score_trial(S, TRUTH, 0, [r, w]).costs.backend_calls == 2.0


def test_a_trials_costs_do_not_depend_on_the_order_its_messages_arrived_in() -> None:
    # Summed in arrival order, 60.0 + 0.1 + 0.2 + 0.3 and 0.3 + 0.2 + 0.1 + 60.0 differ
    # in their last bit: one seed gave 0.7 and 0.7000000000000001 between runs.
    seconds = (60.0, 0.1, 0.2, 0.3, 1e-7)
    sums = {
        Costs.total(Costs(sim_seconds=s, model_calls=1.0) for s in order)
        for order in itertools.permutations(seconds)
    }
    assert sums == {Costs(model_calls=5.0, sim_seconds=math.fsum(seconds))}
    assert Costs.total([]) == Costs() and Costs.total([Costs(retries=2.0)]) == Costs(retries=2.0)


def test_costs_skip_unknown_keys_and_non_numbers() -> None:
    r = msg("researcher", "writer", claims=[{"key": "papers", "value": PAPERS}])
    w = msg("writer", "runner", claims=[{"key": "papers", "value": PAPERS}], derived=[r])
    w.payload["trace"]["costs"] = {"model_calls": 2, "retries": "many", "wall_seconds": 9.0}
    costs = score_trial(S, TRUTH, 0, [r, w]).costs
    assert costs == Costs(backend_calls=1.0, model_calls=2.0)


# -- infrastructure faults ------------------------------------------------------------


def infra_researcher(reason: str) -> Envelope:
    r = msg("researcher", "writer", failures=["infra_fault"], abstained=True)
    r.payload["answer"]["text"] = reason
    return r


def test_a_message_reporting_an_infra_fault_makes_the_trial_one_without_labels() -> None:
    reason = "infra_fault at researcher: cannot reach the model server at 127.0.0.1:9"
    r = infra_researcher(reason)
    # the writer passed it on; whatever its claims, the trial measured nothing
    w = msg("writer", "runner", claims=[{"key": "papers", "value": ["x"]}], derived=[r])
    w.payload["trace"]["failures"] = ["infra_fault"]
    score = score_trial(S, TRUTH, 0, [r, w])
    assert score.outcome is Outcome.INFRA_FAULT
    assert score.reason == reason
    assert score.labels == [] and score.depth == 0
    assert score.costs.backend_calls == 2.0  # known, though summaries leave them out


def test_an_infra_fault_upstream_counts_even_without_a_final_result() -> None:
    r = infra_researcher("infra_fault at researcher: the model server refused the API key")
    assert score_trial(S, TRUTH, 0, [r]).outcome is Outcome.INFRA_FAULT


def test_other_model_failures_are_still_scored() -> None:
    # a rate limit that outlasted the retries is part of the experiment
    r = msg("researcher", "writer", failures=["rate_limit"], unresolved=["papers"])
    w = msg("writer", "runner", claims=[{"key": "papers", "value": ["x"]}], derived=[r])
    assert score_trial(S, TRUTH, 0, [r, w]).outcome is Outcome.CONTAMINATED
