"""Passing on what an agent relied on (errorflow.agents.carry)."""

from __future__ import annotations

from errorflow.agents.carry import carry_forward
from errorflow.models.backend import UpstreamTurn
from errorflow.protocol.claims import Claim, FinalAnswer


def turn(sender: str, answer: FinalAnswer) -> UpstreamTurn:
    return UpstreamTurn(sender, "ok", 1.0, [], answer)


def test_upstream_findings_travel_on_with_their_source() -> None:
    own = FinalAnswer(claims=[Claim("kb", ["KB-1"], True)], text="found kb")
    triage = FinalAnswer(
        claims=[Claim("product", "router", True), Claim("kb", ["stale"], True)],
        unresolved=["priority"],
        flags=["priority: timeout"],
    )
    out = carry_forward(own, [turn("triage", triage)])
    assert out.claims == [Claim("kb", ["KB-1"], True), Claim("product", "router", True, "triage")]
    assert out.unresolved == ["priority"] and out.flags == ["priority: timeout"]
    assert out.text == "found kb" and own.claims == [Claim("kb", ["KB-1"], True)]


def test_provenance_is_kept_across_hops_and_nothing_is_doubled() -> None:
    first = FinalAnswer(claims=[Claim("product", "router", True, "triage")])
    out = carry_forward(FinalAnswer(), [turn("retriever", first), turn("other", first)])
    assert out.claims == [Claim("product", "router", True, "triage")]


def test_an_answer_of_its_own_wins_over_an_open_upstream_need() -> None:
    upstream = FinalAnswer(unresolved=["docs.d1", "price"])
    own = FinalAnswer(claims=[Claim("docs", {"d1": "x"}, True)])
    assert carry_forward(own, [turn("a", upstream)]).unresolved == ["price"]
    assert carry_forward(own, []) is own


def test_a_need_one_input_left_open_and_another_answered_is_answered() -> None:
    """Whichever input came first: the open need is not reported beside the answer."""
    open_ = FinalAnswer(unresolved=["flight", "hotel.h2"])
    found = FinalAnswer(claims=[Claim("flight", "LH-400", True), Claim("hotel", {"h2": "x"}, True)])
    for order in ([turn("a", open_), turn("b", found)], [turn("b", found), turn("a", open_)]):
        out = carry_forward(FinalAnswer(), order)
        assert out.unresolved == [] and {c.key for c in out.claims} == {"flight", "hotel"}
