"""The simulated model: each behaviour parameter decides what it says parameter does."""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import replace
from typing import Any

import pytest

from errorflow.models.backend import (
    AssistantTurn,
    Inspection,
    ModelRequest,
    NeedView,
    ObservationTurn,
    Stance,
    TaskTurn,
    ToolCall,
    ToolDef,
    UpstreamTurn,
)
from errorflow.models.simulated import SimulatedModel
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.scenario.spec.profiles import PROFILES, Tendencies, tendencies

HIDDEN = NeedView("revenue", "query_metric", "name", "2024年营收", None, meant="fin.rev.2024")
KNOWN = NeedView("revenue", "query_metric", "name", "2024 revenue", "fin.rev.2024")
TOOLS = [ToolDef("query_metric", "", {})]


def model(**params: float) -> SimulatedModel:
    base = {k: 0.0 for k in Tendencies.model_fields if k.startswith("p_")}
    base.update(params)
    return SimulatedModel(Tendencies.model_validate(base), random.Random(1))


def ask(m: SimulatedModel, turns: list[Any], role: str = "researcher") -> Any:
    # A writer holding the need's tool would fetch what upstream left open itself.
    tools = [] if role == "writer" else TOOLS
    return asyncio.run(m.complete(ModelRequest("a", role, "sys", turns, tools)))


def failed_call(need: NeedView, arg: Any, obs: dict[str, Any]) -> list[Any]:
    call = ToolCall(f"{need.id}#0", need.tool, {need.arg: arg})
    return [
        TaskTurn("task", [need]),
        AssistantTurn([call]),
        ObservationTurn(call.id, need.tool, {"ok": False, "tool": need.tool, **obs}),
    ]


def test_first_call_uses_the_identifier_when_given_else_the_wording() -> None:
    assert ask(model(), [TaskTurn("t", [KNOWN])]).calls[0].arguments == {"name": "fin.rev.2024"}
    hidden = ask(model(p_use_task_wording=1.0), [TaskTurn("t", [HIDDEN])])
    assert hidden.calls[0].arguments == {"name": "2024年营收"}
    lucky = ask(model(p_use_task_wording=0.0, p_guess_identifier=1.0), [TaskTurn("t", [HIDDEN])])
    assert lucky.calls[0].arguments == {"name": "fin.rev.2024"}


def test_dropping_a_required_argument() -> None:
    assert ask(model(p_drop_required_arg=1.0), [TaskTurn("t", [KNOWN])]).calls[0].arguments == {}


@pytest.mark.parametrize(
    "obs",
    [
        {"error": "Error: connect ETIMEDOUT metrics.internal:443"},
        {"code": "transient", "message": "x", "retryable": True},
    ],
)
def test_transient_self_retry_is_a_tendency(obs: dict[str, Any]) -> None:
    turns = failed_call(KNOWN, "fin.rev.2024", obs)
    gives_up = ask(model(p_self_retry_transient=0.0), turns)
    assert gives_up.final is not None and gives_up.final.unresolved == ["revenue"]
    retries = ask(model(p_self_retry_transient=1.0), turns)
    assert retries.calls[0].arguments == {"name": "fin.rev.2024"}


def test_repair_needs_the_options_listed() -> None:
    raw = failed_call(HIDDEN, "2024年营收", {"error": "Error: ENOENT: no such metric"})
    listed = failed_call(
        HIDDEN,
        "2024年营收",
        {
            "code": "invalid_args",
            "field": "name",
            "received": "2024年营收",
            "options": ["fin.cost.2024", "fin.rev.2024"],
        },
    )
    m = model(p_repair_with_options=1.0, p_repair_without_options=0.0)
    assert ask(m, raw).final is not None
    assert ask(model(p_repair_with_options=1.0), listed).calls[0].arguments == {
        "name": "fin.rev.2024"
    }
    assert ask(model(p_repair_with_options=0.0), listed).final is not None


def test_missing_argument_is_read_apart_from_a_wrong_one() -> None:
    missing = failed_call(HIDDEN, "x", {"code": "invalid_args", "field": "name", "received": None})
    assert ask(model(p_repair_missing_arg=1.0, p_use_task_wording=1.0), missing).calls
    assert ask(model(p_repair_missing_arg=0.0, p_repair_without_options=1.0), missing).final


def test_permission_errors_end_the_attempt() -> None:
    turns = failed_call(KNOWN, "fin.rev.2024", {"code": "permission_denied"})
    answer = ask(model(p_self_retry_transient=1.0, p_repair_with_options=1.0), turns).final
    assert answer is not None and answer.unresolved == ["revenue"] and not answer.claims


def test_empty_result_is_reported_as_nothing_found_or_flagged() -> None:
    call = ToolCall("revenue#0", "query_metric", {"name": "fin.rev.2024"})
    turns = [
        TaskTurn("t", [KNOWN]),
        AssistantTurn([call]),
        ObservationTurn(call.id, "query_metric", {"ok": True, "result": None}),
    ]
    stated = ask(model(p_flag_empty=0.0), turns).final
    assert stated is not None and stated.claims == [Claim("revenue", None, True)]
    flagged = ask(model(p_flag_empty=1.0), turns).final
    assert flagged is not None and flagged.claims[0].certain is False and flagged.flags


def upstream(
    status: str,
    claims: list[Claim],
    errors: list[dict[str, Any]] | None = None,
    confidence: float = 1.0,
) -> UpstreamTurn:
    return UpstreamTurn("researcher", status, confidence, errors or [], FinalAnswer(claims=claims))


def test_writer_copies_good_findings() -> None:
    turns = [TaskTurn("t", [KNOWN]), upstream("ok", [Claim("revenue", 5, True)])]
    answer = ask(model(), turns, role="writer").final
    assert answer is not None and answer.claims == [Claim("revenue", 5, True)]


def test_writer_heeds_or_ignores_upstream_failure() -> None:
    turns = [
        TaskTurn("t", [KNOWN]),
        upstream("failed", [], [{"code": "permission_denied"}], confidence=0.4),
    ]
    heeds = ask(model(p_heed_upstream=1.0, p_fabricate_on_missing=1.0), turns, "writer").final
    assert heeds is not None and heeds.abstained and heeds.flags and not heeds.claims
    ignores = ask(model(p_heed_upstream=0.0, p_fabricate_on_missing=1.0), turns, "writer").final
    assert ignores is not None and ignores.claims and ignores.claims[0].certain


def test_writer_takes_the_input_that_found_a_need_over_one_that_did_not() -> None:
    """Fan-in: one input has an empty finding for the need, the other the value."""
    empty = upstream("ok", [Claim("revenue", None, True)])
    found = UpstreamTurn("other", "ok", 1.0, [], FinalAnswer(claims=[Claim("revenue", 5, True)]))
    turns = [TaskTurn("t", [KNOWN]), empty, found]
    answer = ask(model(p_fabricate_on_empty=1.0), turns, "writer").final
    assert answer is not None and answer.claims == [Claim("revenue", 5, True)]


@pytest.mark.parametrize(
    ("shape", "looks_like"),
    [
        ("date", r"\d{4}-\d{2}-\d{2}"),
        ("string", r"fabricated-\d+"),
        ("number", None),
        (None, None),
    ],
)
def test_an_invented_answer_has_the_shape_the_need_asks_for(
    shape: str | None, looks_like: str | None
) -> None:
    need = replace(KNOWN, shape=shape)
    turns = [TaskTurn("t", [need]), upstream("ok", [])]
    answer = ask(model(p_heed_upstream=0.0, p_fabricate_on_missing=1.0), turns, "writer").final
    [claim] = answer.claims
    if looks_like is None:
        assert isinstance(claim.value, float)
    else:
        assert isinstance(claim.value, str) and re.fullmatch(looks_like, claim.value)


def test_writer_fabricates_on_an_empty_finding() -> None:
    turns = [TaskTurn("t", [KNOWN]), upstream("ok", [Claim("revenue", None, True)])]
    invents = ask(model(p_fabricate_on_empty=1.0), turns, "writer").final
    assert invents is not None and invents.claims[0].value is not None
    honest = ask(model(p_fabricate_on_empty=0.0), turns, "writer").final
    assert honest is not None and honest.claims[0].value is None


def test_tokens_grow_with_the_context() -> None:
    short = ask(model(), [TaskTurn("t", [KNOWN])]).usage.input_tokens
    long = ask(model(), failed_call(KNOWN, "fin.rev.2024", {"error": "x" * 4000})).usage
    assert long.input_tokens > short + 900


def test_same_seed_same_decisions() -> None:
    b = tendencies("small-local")
    turns = [TaskTurn("t", [HIDDEN])] * 1
    draws = [
        [ask(SimulatedModel(b, random.Random(s)), turns).calls[0].arguments for _ in range(3)]
        for s in (5, 5)
    ]
    assert draws[0] == draws[1]


def test_profiles() -> None:
    assert set(PROFILES) >= {"small-local", "frontier"}
    small = tendencies("small-local")
    assert small.p_repair_with_options == 0.8 and small.p_self_retry_transient == 0.0
    assert tendencies("small-local", {"p_heed_upstream": 0.1}).p_heed_upstream == 0.1
    with pytest.raises(ValueError, match="unknown model profile"):
        tendencies("gpt-9")
    with pytest.raises(ValueError):
        tendencies("small-local", {"p_heed_upstream": 1.5})
    with pytest.raises(ValueError):
        tendencies("small-local", {"p_typo": 0.5})


def reviewed(claims: list[Claim], result: Any, need: NeedView = KNOWN) -> FinalAnswer:
    """A reviewer's verdict on a report after its tool call answered `result`."""
    m = model()
    turns: list[Any] = [TaskTurn("t", [need]), upstream("ok", claims)]
    first = ask(m, turns, role="reviewer")
    assert [c.id for c in first.calls] == [f"{need.id}#0"]  # it checks with the tools first
    turns += [
        AssistantTurn(first.calls),
        ObservationTurn(first.calls[0].id, need.tool, {"ok": True, "result": result}),
    ]
    answer = ask(m, turns, role="reviewer").final
    assert answer is not None
    return answer


def test_reviewer_keeps_what_checks_out_and_sends_back_what_does_not() -> None:
    kept = reviewed([Claim("revenue", 5, True)], 5)
    assert kept.claims == [Claim("revenue", 5, True)] and kept.revise == []
    assert not kept.abstained
    sent_back = reviewed([Claim("revenue", 5, True)], 6)
    assert sent_back.claims == [] and sent_back.revise == ["revenue"] and sent_back.abstained
    assert sent_back.flags == ["revenue: contradicted by the source; sent back"]


def test_reviewer_checks_a_batch_item_by_item() -> None:
    docs = NeedView("docs", "query_metric", "ids", "the documents", ["d1", "d2"])
    answer = reviewed(
        [Claim("docs.d1", "x", True), Claim("docs.d2", "y", True)], {"d1": "x", "d2": "z"}, docs
    )
    assert answer.claims == [Claim("docs.d1", "x", True)] and answer.revise == ["docs.d2"]


def test_reviewer_marks_what_it_cannot_check_as_uncertain() -> None:
    turns = [TaskTurn("t", [KNOWN]), upstream("ok", [Claim("cost", 3, True)])]
    answer = ask(model(), turns, role="reviewer").final  # no need serves "cost": no call
    assert answer is not None
    assert answer.claims == [Claim("cost", 3, False)]
    assert answer.flags == ["cost: could not be verified"]


# -- checking with a second source ------------------------------------------------------------

SOURCED = replace(KNOWN, tool="kpi_cache", sources=("kpi_origin",))
ORIGIN = [ToolDef("kpi_origin", "", {})]


def checked_with_origin(stance: Stance, behaviour_: str, turns: list[Any]) -> FinalAnswer:
    """Run a checking agent that holds only the second source: its first response calls
    that source for the need; the second, given the source's answer (7), is final."""
    m = model()
    request = ModelRequest("checker", "x", "sys", turns, ORIGIN, behaviour_, stance)
    first = asyncio.run(m.complete(request))
    assert [(c.name, c.arguments) for c in first.calls] == [
        ("kpi_origin", {"name": "fin.rev.2024"})
    ]
    call = first.calls[0]
    later = [
        *turns,
        AssistantTurn([call]),
        ObservationTurn(call.id, "kpi_origin", {"ok": True, "result": 7}),
    ]
    final = asyncio.run(m.complete(replace(request, turns=later))).final
    assert final is not None
    return final


def test_a_reviewer_checks_a_claim_with_a_second_source() -> None:
    turns = [TaskTurn("t", [SOURCED]), upstream("ok", [Claim("revenue", 6, True)])]
    answer = checked_with_origin(Stance(), "check", turns)
    assert answer.revise == ["revenue"]  # the cache said 6, the system of record 7


def test_an_inspector_corrects_a_claim_from_a_second_source() -> None:
    turns = [TaskTurn("t", [SOURCED]), upstream("ok", [Claim("revenue", 6, True)])]
    answer = checked_with_origin(Stance(inspect=Inspection()), "check", turns)
    assert answer.claims == [Claim("revenue", 7, True)]
    assert answer.flags == ["revenue: corrected by inspection"]


def test_a_challenger_rechecks_a_claim_with_a_second_source() -> None:
    turns = [TaskTurn("t", [SOURCED]), upstream("ok", [Claim("revenue", 6, True)])]
    answer = checked_with_origin(Stance(challenge=1.0), "synthesise", turns)
    assert [(c.key, c.value) for c in answer.claims] == [("revenue", 7)]


def test_a_challenger_in_a_discussion_rechecks_with_a_second_source() -> None:
    mine = UpstreamTurn("checker", "ok", 1.0, [], FinalAnswer(claims=[Claim("revenue", 5, True)]))
    peer = UpstreamTurn("peer", "ok", 1.0, [], FinalAnswer(claims=[Claim("revenue", 6, True)]))
    turns = [TaskTurn("t", [SOURCED]), mine, peer]
    answer = checked_with_origin(Stance(challenge=1.0, deliberate=True), "gather", turns)
    assert [(c.key, c.value) for c in answer.claims] == [("revenue", 7)]


def test_without_a_second_source_a_checker_cannot_check_the_claim() -> None:
    turns = [
        TaskTurn("t", [replace(SOURCED, sources=())]),
        upstream("ok", [Claim("revenue", 6, True)]),
    ]
    request = ModelRequest("checker", "x", "sys", turns, ORIGIN, "check")
    answer = asyncio.run(model().complete(request))
    assert answer.calls == [] and answer.final is not None
    assert answer.final.claims == [Claim("revenue", 6, False)]
