"""Model-facing observations: short, stable, actionable, redacted, in two styles."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from errorflow.core.taxonomy import RETRYABLE, ErrorCode
from errorflow.policies.classify import ArgumentProblem, Failure
from errorflow.policies.observation import MAX_OPTIONS, observe_failure, observe_success

ACTIONABLE_KEYS = {"ok", "tool", "code", "message", "retryable", "retry_after_s", "suggestion"}


@pytest.mark.parametrize("code", list(ErrorCode))
def test_actionable_shape_for_every_code(code: ErrorCode) -> None:
    obs = observe_failure(Failure(code, "t", "raw text"), "actionable", tell_class=True)
    assert set(obs) >= ACTIONABLE_KEYS
    assert obs["ok"] is False and obs["tool"] == "t" and obs["code"] == code.value
    assert obs["retryable"] is (code in RETRYABLE)
    assert obs["message"] and obs["suggestion"]
    assert "raw text" not in json.dumps(obs)  # the library's text stays out


def test_raw_style_is_the_library_text() -> None:
    f = Failure(ErrorCode.TRANSIENT, "t", "HTTP 503 Service Unavailable", 503)
    assert observe_failure(f, "raw", tell_class=False) == {
        "ok": False,
        "tool": "t",
        "error": "HTTP 503 Service Unavailable",
    }
    told = observe_failure(f, "raw", tell_class=True)
    assert told["code"] == "transient" and told["retryable"] is True
    f = dataclasses.replace(f, attempts=3)
    assert observe_failure(f, "raw", tell_class=False)["error"] == (
        "tool failed after 3 attempts: HTTP 503 Service Unavailable"
    )


def test_retry_after_is_passed_on() -> None:
    f = Failure(ErrorCode.RATE_LIMIT, "t", "429", 429, retry_after_s=12.0)
    obs = observe_failure(f, "actionable", tell_class=True)
    assert obs["retry_after_s"] == 12.0 and obs["retryable"] is True


def arg_failure(options: list[str] | None = None, **kw: Any) -> Failure:
    base: dict[str, Any] = {"field": "name", "constraint": "required", "received": None}
    return Failure(
        ErrorCode.INVALID_ARGS,
        "metric_store",
        "TypeError: ...",
        argument=ArgumentProblem(**(base | kw)),
        options=tuple(options or ()),
    )


def test_missing_argument() -> None:
    obs = observe_failure(arg_failure(missing=True), "actionable", tell_class=True)
    assert obs["field"] == "name" and obs["constraint"] == "required"
    assert obs["received"] is None and "options" not in obs
    assert obs["message"] == "Required argument 'name' is missing from the call to metric_store."
    assert obs["suggestion"] == "Call metric_store again and include 'name'."


def test_wrong_argument_with_options() -> None:
    f = arg_failure(
        constraint="must be one of the known values",
        received="2024年营收",
        options=["fin.cost.2024", "fin.rev.2024"],
    )
    obs = observe_failure(f, "actionable", tell_class=True)
    assert obs["received"] == "2024年营收"
    assert obs["options"] == ["fin.cost.2024", "fin.rev.2024"]
    assert "received '2024年营收'" in obs["message"]
    assert obs["suggestion"] == (
        "Call metric_store again with 'name' set to one of: fin.cost.2024, fin.rev.2024."
    )


def test_wrong_argument_without_options_names_the_constraint() -> None:
    f = arg_failure(constraint="Input should be a valid string", received=12345)
    obs = observe_failure(f, "actionable", tell_class=True)
    assert obs["received"] == 12345
    assert "Input should be a valid string" in obs["suggestion"]


def test_unexpected_argument() -> None:
    f = arg_failure(field="verbose", received=True, options=["name"], unexpected=True)
    obs = observe_failure(f, "actionable", tell_class=True)
    assert obs["message"] == "'verbose' is not an argument of metric_store."
    assert obs["suggestion"] == (
        "Call metric_store again without 'verbose'; its arguments are: name."
    )


def test_invalid_args_without_details_still_names_the_argument_keys() -> None:
    # An HTTP 400/422 is invalid_args with no argument facts: the keys are there, empty.
    f = Failure(ErrorCode.INVALID_ARGS, "t", "HTTP 422", 422)
    obs = observe_failure(f, "actionable", tell_class=True)
    assert (obs["field"], obs["constraint"], obs["received"]) == (None, None, None)
    assert "options" not in obs
    assert obs["message"] == "Argument 'None' of t is not valid: received 'None'."
    assert obs["suggestion"] == "Call t again with a valid 'None' (None)."


def test_missing_and_wrong_read_differently() -> None:
    missing = observe_failure(arg_failure(missing=True), "actionable", tell_class=True)
    wrong = observe_failure(arg_failure(received="x"), "actionable", tell_class=True)
    assert missing["message"] != wrong["message"]
    assert missing["suggestion"] != wrong["suggestion"]


def test_options_are_capped() -> None:
    f = arg_failure(received="x", options=[f"m{i}" for i in range(50)])
    obs = observe_failure(f, "actionable", tell_class=True)
    assert len(obs["options"]) == MAX_OPTIONS


def test_everything_model_facing_is_redacted() -> None:
    key = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    f = arg_failure(
        received=f"/home/alice/{key}",
        options=["postgres://u:p@db:5432/x", key],
        constraint=f"token={key}",
    )
    for style in ("raw", "actionable"):
        obs = observe_failure(f, style, tell_class=True)
        text = json.dumps(obs)
        assert key not in text and "u:p@db" not in text and "/home/alice" not in text
    br = Failure(ErrorCode.BUSINESS_RULE, "t", "{}", 200, reason=f"key {key} revoked")
    assert key not in json.dumps(observe_failure(br, "actionable", tell_class=True))


def test_success_and_soft_failures() -> None:
    assert observe_success("t", {"v": 1}) == {"ok": True, "tool": "t", "result": {"v": 1}}
    assert observe_success("t", "/home/alice/x.txt")["result"] == "[PATH]"
    empty = Failure(ErrorCode.EMPTY_RESULT, "t", "(empty)", 200)
    assert observe_success("t", [], empty) == {"ok": True, "tool": "t", "result": []}
    told = observe_success("t", [], empty, tell_class=True)
    assert told["code"] == "empty_result" and "message" not in told
    act = observe_success("t", [], empty, style="actionable", tell_class=True)
    assert act["code"] == "empty_result" and "empty" in act["message"] and act["suggestion"]
    part = Failure(ErrorCode.PARTIAL_SUCCESS, "t", "1 failed", 200, item_errors={"d2": "x"})
    raw = observe_success("t", {"d1": "a"}, part)
    assert raw == {
        "ok": True,
        "tool": "t",
        "result": {"d1": "a"},
        "code": "partial_success",
        "failed_items": ["d2"],
    }
    act = observe_success("t", {"d1": "a"}, part, style="actionable")
    assert act["failed_items"] == ["d2"] and "1 item(s) failed" in act["message"]
