"""The simulated model: each behaviour parameter decides what it says parameter does."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from errorflow.agents.model import (
    AssistantTurn,
    Claim,
    FinalAnswer,
    ModelRequest,
    NeedView,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    ToolDef,
    UpstreamTurn,
)
from errorflow.agents.profiles import PROFILES, Behaviour, behaviour
from errorflow.agents.simulated import SimulatedModel

HIDDEN = NeedView("revenue", "query_metric", "name", "2024年营收", None, meant="fin.rev.2024")
KNOWN = NeedView("revenue", "query_metric", "name", "2024 revenue", "fin.rev.2024")
TOOLS = [ToolDef("query_metric", "", {})]


def model(**params: float) -> SimulatedModel:
    base = {k: 0.0 for k in Behaviour.model_fields if k.startswith("p_")}
    base.update(params)
    return SimulatedModel(Behaviour.model_validate(base), random.Random(1))


def ask(m: SimulatedModel, turns: list[Any], role: str = "researcher") -> Any:
    return asyncio.run(m.complete(ModelRequest("a", role, "sys", turns, TOOLS)))


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
    b = behaviour("small-local")
    turns = [TaskTurn("t", [HIDDEN])] * 1
    draws = [
        [ask(SimulatedModel(b, random.Random(s)), turns).calls[0].arguments for _ in range(3)]
        for s in (5, 5)
    ]
    assert draws[0] == draws[1]


def test_profiles() -> None:
    assert set(PROFILES) >= {"small-local", "frontier"}
    small = behaviour("small-local")
    assert small.p_repair_with_options == 0.8 and small.p_self_retry_transient == 0.0
    assert behaviour("small-local", {"p_heed_upstream": 0.1}).p_heed_upstream == 0.1
    with pytest.raises(ValueError, match="unknown model profile"):
        behaviour("gpt-9")
    with pytest.raises(ValueError):
        behaviour("small-local", {"p_heed_upstream": 1.5})
    with pytest.raises(ValueError):
        behaviour("small-local", {"p_typo": 0.5})
