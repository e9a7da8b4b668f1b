"""Answers on the wire: what a result payload's `answer` object holds, both ways."""

from __future__ import annotations

import json

import pytest

from errorflow.protocol.claims import (
    Claim,
    FinalAnswer,
    answer_from_wire,
    answer_to_wire,
    claim_to_wire,
)

FULL = FinalAnswer(
    claims=[Claim("revenue", 5.5, True), Claim("papers", ["p1", "p2"], False)],
    abstained=False,
    flags=["papers: empty result, may be incomplete"],
    unresolved=["docs.d2"],
    text="Found revenue, papers.",
    revise=["papers"],
)


def test_the_wire_form_lists_every_field() -> None:
    assert answer_to_wire(FULL) == {
        "claims": [
            {"key": "revenue", "value": 5.5, "certain": True},
            {"key": "papers", "value": ["p1", "p2"], "certain": False},
        ],
        "abstained": False,
        "flags": ["papers: empty result, may be incomplete"],
        "unresolved": ["docs.d2"],
        "text": "Found revenue, papers.",
        "revise": ["papers"],
    }
    assert claim_to_wire(Claim("k", None, False)) == {"key": "k", "value": None, "certain": False}


def test_an_answer_survives_the_wire() -> None:
    assert answer_from_wire(json.loads(json.dumps(answer_to_wire(FULL)))) == FULL
    assert answer_from_wire(answer_to_wire(FinalAnswer())) == FinalAnswer()


def test_the_wire_form_does_not_share_the_answers_lists() -> None:
    answer = FinalAnswer(flags=["a"])
    wire = answer_to_wire(answer)
    answer.flags.append("b")
    assert wire["flags"] == ["a"]


@pytest.mark.parametrize("data", [None, "an answer", 3, ["claims"]])
def test_what_is_not_an_object_reads_as_a_malformed_abstention(data: object) -> None:
    assert answer_from_wire(data) == FinalAnswer(abstained=True, flags=["malformed answer"])


def test_reading_is_defensive() -> None:
    answer = answer_from_wire(
        {
            "claims": [{"key": "a", "value": 1}, {"key": 2, "value": 3}, "junk", {"value": 4}],
            "abstained": 1,
            "flags": ["x", 7],
            "unresolved": None,
            "text": 42,
            "revise": [3],
        }
    )
    assert answer == FinalAnswer(
        claims=[Claim("a", 1, True)],  # a claim without a string key is dropped
        abstained=True,
        flags=["x", "7"],
        unresolved=[],
        text="42",
        revise=["3"],
    )
    assert answer_from_wire({}) == FinalAnswer()
