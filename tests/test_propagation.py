"""Propagation's rules, directly: status, confidence, the errors that travel, and which
failures are reported at all."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from errorflow.agents.propagation import (
    Verdict,
    confidence,
    dedupe,
    fallback_answer,
    lowered,
    open_tools,
    own_errors,
    propagate,
    short,
    status,
    unrecovered,
    upstream_errors,
)
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import NeedView
from errorflow.policies.classify import Failure
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import Status, WireError
from errorflow.protocol.stop import CRASHED, StopReason


@dataclass(frozen=True)
class Sent:
    """An input as propagation reads it (an Envelope in the agent)."""

    confidence: float = 1.0
    errors: list[WireError] = field(default_factory=list)


CLAIMED = FinalAnswer(claims=[Claim("x", 1)])
NOT_FOUND = Failure(ErrorCode.NOT_FOUND, "q", "404 for a.x")
UPSTREAM = WireError(code=ErrorCode.TIMEOUT, tool="search", origin="researcher", hops=0)


def need(id_: str, tool: str) -> NeedView:
    return NeedView(id_, tool, "name", id_, id_)


# -- explicit vs implicit --------------------------------------------------------------


def test_explicit_reports_own_and_upstream_errors() -> None:
    v = propagate(
        "explicit",
        agent="writer",
        final=CLAIMED,
        failures=[NOT_FOUND],
        stopped=None,
        inputs=[Sent(0.9, [UPSTREAM])],
    )
    assert v.status is Status.PARTIAL_FAILURE
    assert v.confidence == 0.4
    assert [(e.code, e.origin, e.hops) for e in v.errors] == [
        (ErrorCode.NOT_FOUND, "writer", 0),
        (ErrorCode.TIMEOUT, "researcher", 1),
    ]


def test_implicit_says_ok_with_full_confidence_whatever_happened() -> None:
    v = propagate(
        "implicit",
        agent="writer",
        final=FinalAnswer(abstained=True, unresolved=["x"]),
        failures=[NOT_FOUND],
        stopped=StopReason(ErrorCode.STEP_LIMIT),
        inputs=[Sent(0.2, [UPSTREAM])],
    )
    assert (v.status, v.confidence, v.errors) == (Status.OK, 1.0, [])


def test_a_clean_result_is_ok_and_as_confident_as_its_inputs() -> None:
    v = propagate("explicit", agent="a", final=CLAIMED, failures=[], stopped=None, inputs=[])
    assert (v.status, v.confidence, v.errors) == (Status.OK, 1.0, [])
    v = propagate(
        "explicit", agent="a", final=CLAIMED, failures=[], stopped=None, inputs=[Sent(0.7)]
    )
    assert (v.status, v.confidence) == (Status.OK, 0.7)


# -- confidence caps -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("final", "errors", "expected"),
    [
        (CLAIMED, [], 1.0),
        (FinalAnswer(claims=[Claim("x", 1)], flags=["odd"]), [], 0.6),
        (FinalAnswer(claims=[Claim("x", 1)], unresolved=["y"]), [], 0.6),
        (CLAIMED, [UPSTREAM], 0.4),
        (FinalAnswer(flags=["odd"]), [UPSTREAM], 0.4),
        (FinalAnswer(abstained=True), [], 0.2),
        (FinalAnswer(abstained=True, flags=["odd"]), [UPSTREAM], 0.2),
    ],
)
def test_confidence_caps(final: FinalAnswer, errors: list[WireError], expected: float) -> None:
    assert confidence(final, errors, 1.0) == expected


def test_confidence_is_never_above_the_inputs() -> None:
    assert confidence(CLAIMED, [], 0.3) == 0.3
    assert confidence(FinalAnswer(flags=["odd"]), [], 0.5) == 0.5
    assert confidence(FinalAnswer(abstained=True), [], 0.5) == 0.2
    assert confidence(CLAIMED, [], 0.12345) == 0.123  # rounded for the wire


def test_the_lowest_input_confidence_bounds_the_result() -> None:
    v = propagate(
        "explicit",
        agent="a",
        final=CLAIMED,
        failures=[],
        stopped=None,
        inputs=[Sent(0.9), Sent(0.35)],
    )
    assert v.confidence == 0.35


# -- status ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("final", "errors", "stopped", "expected"),
    [
        (CLAIMED, [], None, Status.OK),
        (CLAIMED, [UPSTREAM], None, Status.PARTIAL_FAILURE),
        (CLAIMED, [], StopReason(ErrorCode.NO_PROGRESS), Status.PARTIAL_FAILURE),
        (FinalAnswer(claims=[Claim("x", 1)], flags=["odd"]), [], None, Status.PARTIAL_FAILURE),
        (FinalAnswer(claims=[Claim("x", 1)], unresolved=["y"]), [], None, Status.PARTIAL_FAILURE),
        (FinalAnswer(claims=[Claim("x", 1)], abstained=True), [], None, Status.PARTIAL_FAILURE),
        (FinalAnswer(), [UPSTREAM], None, Status.FAILED),
        (FinalAnswer(), [], CRASHED, Status.FAILED),
        (FinalAnswer(unresolved=["x"]), [], None, Status.FAILED),
        (FinalAnswer(abstained=True), [], None, Status.FAILED),
        # nothing claimed, but nothing went wrong either: only a flag
        (FinalAnswer(flags=["odd"]), [], None, Status.PARTIAL_FAILURE),
        (FinalAnswer(), [], None, Status.OK),
    ],
)
def test_failed_vs_partial_failure(
    final: FinalAnswer, errors: list[WireError], stopped: StopReason | None, expected: Status
) -> None:
    assert status(final, errors, stopped) is expected


# -- the errors that travel ------------------------------------------------------------


def test_own_errors_start_at_hop_0_with_this_agent_as_origin() -> None:
    timeout = Failure(ErrorCode.TIMEOUT, "search", "read timed out", attempts=3)
    limited = Failure(ErrorCode.RATE_LIMIT, "search", "429", retry_after_s=2.0)
    errors = own_errors("researcher", [timeout, limited])
    assert [e.model_dump(mode="json") for e in errors] == [
        {
            "code": "timeout",
            "tool": "search",
            "message": "search: timeout after 3 attempts",
            "retryable": True,
            "retry_after_s": None,
            "suggestion": None,
            "origin": "researcher",
            "hops": 0,
        },
        {
            "code": "rate_limit",
            "tool": "search",
            "message": "search: rate_limit",
            "retryable": True,
            "retry_after_s": 2.0,
            "suggestion": None,
            "origin": "researcher",
            "hops": 0,
        },
    ]
    assert not own_errors("a", [NOT_FOUND])[0].retryable


def test_upstream_errors_keep_their_origin_and_travel_one_hop_further() -> None:
    two_hops = UPSTREAM.model_copy(update={"hops": 2, "origin": "scout"})
    errors = upstream_errors([Sent(errors=[UPSTREAM]), Sent(errors=[two_hops])])
    assert [(e.origin, e.hops) for e in errors] == [("researcher", 1), ("scout", 3)]
    assert UPSTREAM.hops == 0  # the input is not changed


def test_dedupe_keeps_the_first_failure_of_each_tool_and_code() -> None:
    again = Failure(ErrorCode.NOT_FOUND, "q", "404 for a.y", attempts=2)
    other_tool = Failure(ErrorCode.NOT_FOUND, "r", "404")
    other_code = Failure(ErrorCode.TIMEOUT, "q", "timed out")
    assert dedupe([NOT_FOUND, again, other_tool, other_code]) == [
        NOT_FOUND,
        other_tool,
        other_code,
    ]
    assert len(own_errors("a", [NOT_FOUND, again])) == 1


def test_the_message_names_tool_and_class_never_the_raw_text() -> None:
    assert short(NOT_FOUND) == "q: not_found"
    assert "404" not in own_errors("a", [NOT_FOUND])[0].message


# -- which failures are reported -------------------------------------------------------

NEEDS = [need("x", "q"), need("y", "q"), need("z", "r")]


def test_open_tools() -> None:
    own = NEEDS[:2]
    certain = FinalAnswer(claims=[Claim("x", 1), Claim("y", 2)])
    assert open_tools(NEEDS, own, certain) == set()
    # a sub-key answers its need ("x.revenue" for need x)
    assert open_tools(NEEDS, own, FinalAnswer(claims=[Claim("x.a", 1), Claim("y", 2)])) == set()
    uncertain = FinalAnswer(claims=[Claim("x", 1), Claim("y", None, certain=False)])
    assert open_tools(NEEDS, own, uncertain) == {"q"}
    # an unresolved need opens its tool, even one this agent does not answer for
    assert open_tools(NEEDS, own, FinalAnswer(claims=certain.claims, unresolved=["z"])) == {"r"}
    assert open_tools(NEEDS, own, FinalAnswer(claims=certain.claims, unresolved=["z.1"])) == {"r"}


def test_a_failure_is_recovered_when_its_tool_succeeded_and_its_needs_are_certain() -> None:
    assert unrecovered([NOT_FOUND], succeeded_tools={"q"}, open_=set()) == []


def test_a_failure_of_a_tool_that_never_succeeded_is_reported() -> None:
    assert unrecovered([NOT_FOUND], succeeded_tools={"r"}, open_=set()) == [NOT_FOUND]


def test_a_failure_of_a_tool_with_an_open_need_is_reported() -> None:
    assert unrecovered([NOT_FOUND], succeeded_tools={"q"}, open_={"q"}) == [NOT_FOUND]


def test_model_failures_are_never_recovered() -> None:
    model = Failure(ErrorCode.TRANSIENT, "model", "529", http_status=529)
    assert unrecovered([model], succeeded_tools={"model"}, open_=set()) == [model]


def test_a_stopped_explicit_agent_leaves_its_needs_unresolved() -> None:
    answer = fallback_answer("explicit", NEEDS[:2], StopReason(ErrorCode.PERMISSION_DENIED, True))
    assert answer.text == "stopped: unrecoverable:permission_denied"
    assert (answer.claims, answer.unresolved) == ([], ["x", "y"])


def test_a_stopped_implicit_agent_reports_nothing_found_as_certain() -> None:
    answer = fallback_answer("implicit", NEEDS[:2], StopReason(ErrorCode.STEP_LIMIT))
    assert answer.text == "stopped: step_limit"
    assert answer.claims == [Claim("x", None, True), Claim("y", None, True)]
    assert answer.unresolved == []


def test_a_stated_status_and_confidence_only_lower_the_verdict() -> None:
    base = Verdict(Status.PARTIAL_FAILURE, 0.4, [])
    assert lowered(base, "ok", 0.9) == base  # never more than errorflow derived
    assert lowered(base, "failed", None) == Verdict(Status.FAILED, 0.4, [])
    assert lowered(base, None, 0.25) == Verdict(Status.PARTIAL_FAILURE, 0.25, [])
    assert lowered(Verdict(Status.OK, 1.0, []), "partial_failure", 0.5) == Verdict(
        Status.PARTIAL_FAILURE, 0.5, []
    )
