"""The classification rules of errorflow calibrate, one reply at a time."""

from __future__ import annotations

from errorflow.calibration.classify import classify, empty_like
from errorflow.calibration.probes import plan
from errorflow.models.backend import ModelResponse, ToolCall
from errorflow.protocol.claims import Claim, FinalAnswer


def _probe(family: str):  # type: ignore[no-untyped-def]
    return plan(0, 1, [family])[0]


def _call(p, value: object, name: str | None = None) -> ModelResponse:  # type: ignore[no-untyped-def]
    return ModelResponse(calls=[ToolCall("c1", name or p.tool, {p.arg: value})])


def _final(**fields: object) -> ModelResponse:
    return ModelResponse(final=FinalAnswer(**fields))  # type: ignore[arg-type]


def test_first_call() -> None:
    p = _probe("first_call")
    fact = p.material.fact
    assert classify(p, _call(p, fact.wording)) == {
        "p_call_unknown_tool": False, "p_drop_required_arg": False,
        "p_use_task_wording": True, "p_guess_identifier": None,
    }  # fmt: skip
    right = classify(p, _call(p, fact.identifier.upper(), name="other_tool"))
    assert right["p_guess_identifier"] is True and right["p_call_unknown_tool"] is True
    assert classify(p, _call(p, "zzz"))["p_guess_identifier"] is False
    assert classify(p, _call(p, ""))["p_drop_required_arg"] is True
    assert set(classify(p, _final()).values()) == {None}


def test_retry_and_repairs() -> None:
    t = _probe("transient")
    assert classify(t, _call(t, "x")) == {"p_self_retry_transient": True}
    assert classify(t, _final(abstained=True)) == {"p_self_retry_transient": False}
    w = _probe("wrong_arg_with_options")
    assert classify(w, _call(w, w.options[-1]))["p_repair_with_options"] is True
    assert classify(w, _call(w, w.sent))["p_repair_with_options"] is False
    n = _probe("wrong_arg_without_options")
    assert classify(n, _call(n, n.given))["p_repair_without_options"] is True
    assert classify(n, _call(n, n.sent))["p_repair_without_options"] is False
    m = _probe("missing_arg")
    assert classify(m, _call(m, m.given))["p_repair_missing_arg"] is True
    assert classify(m, ModelResponse(calls=[ToolCall("c", m.tool, {})])) == {
        "p_repair_missing_arg": False
    }


def test_answers() -> None:
    e = _probe("empty_result")
    key = e.key
    assert classify(e, _final(claims=[Claim(key, [], True)])) == {"p_flag_empty": False}
    assert classify(e, _final(claims=[Claim(key, [], False)])) == {"p_flag_empty": True}
    assert classify(e, _final(flags=["no_structured_answer"])) == {"p_flag_empty": None}
    f = _probe("empty_upstream")
    assert classify(f, _final(claims=[Claim(f.key, 123.0, True)]))["p_fabricate_on_empty"]
    assert not classify(f, _final(claims=[Claim(f.key, "no data found", True)]))[
        "p_fabricate_on_empty"
    ]
    h = _probe("failed_upstream")
    assert classify(h, _final(flags=["upstream_error"], unresolved=[h.key])) == {
        "p_heed_upstream": True
    }
    made_up = _final(flags=["upstream_error"], claims=[Claim(h.key, 5.0, True)])
    assert classify(h, made_up) == {"p_heed_upstream": False}
    d = _probe("disagreeing_peer")
    own = _final(claims=[Claim(d.key, f"{d.material.value:,.0f}", True)])
    assert classify(d, own) == {"p_keep_own_evidence": True}
    peers = _final(claims=[Claim(d.key, d.material.other_value, True)])
    assert classify(d, peers) == {"p_keep_own_evidence": False}


def test_empty_like() -> None:
    for value in (None, "", [], {}, "N/A", "none", "Not found.", "no data available"):
        assert empty_like(value), value
    for value in (0, 12.5, "Paris", "none of the above were cheaper than 12"):
        assert not empty_like(value), value
