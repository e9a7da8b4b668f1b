"""The result payload's wire shape, and where a result goes."""

from __future__ import annotations

from errorflow.agents.routing import route
from errorflow.core.costs import Costs
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import Kind
from errorflow.protocol.result import ResultPayload
from errorflow.protocol.stop import StopReason
from errorflow.scenario.spec.model import AgentSpec

ANSWER = FinalAnswer(claims=[Claim("x", 1)], unresolved=["y"], text="found x")
COSTS = Costs(backend_calls=2, model_calls=3, input_tokens=10, output_tokens=5, retries=1)


def payload(**update: object) -> ResultPayload:
    fields: dict[str, object] = {
        "role": "researcher",
        "round": 0,
        "answer": ANSWER,
        "stopped": StopReason(ErrorCode.PERMISSION_DENIED, unrecoverable=True),
        "costs": COSTS,
        "failures": [ErrorCode.PERMISSION_DENIED, ErrorCode.PERMISSION_DENIED],
    }
    fields.update(update)
    return ResultPayload(**fields)  # type: ignore[arg-type]


def test_the_wire_shape() -> None:
    assert payload().to_wire() == {
        "role": "researcher",
        "round": 0,
        "answer": {
            "claims": [{"key": "x", "value": 1, "certain": True}],
            "abstained": False,
            "flags": [],
            "unresolved": ["y"],
            "text": "found x",
            "revise": [],
        },
        "stopped": "unrecoverable:permission_denied",
        "trace": {
            "costs": {
                "backend_calls": 2,
                "model_calls": 3,
                "input_tokens": 10,
                "output_tokens": 5,
                "retries": 1,
                "sim_seconds": 0.0,
            },
            "failures": ["permission_denied", "permission_denied"],
        },
    }
    assert list(payload().to_wire()) == ["role", "round", "answer", "stopped", "trace"]


def test_no_stop_is_null_and_no_costs_are_empty() -> None:
    wire = payload(stopped=None).without_costs().to_wire()
    assert wire["stopped"] is None
    assert wire["trace"] == {"costs": {}, "failures": ["permission_denied", "permission_denied"]}


def spec(**fields: object) -> AgentSpec:
    return AgentSpec.model_validate({"role": "writer", **fields})


def test_a_result_goes_to_every_agent_it_sends_to_or_the_runner() -> None:
    r = route(spec(sends_to=["reviewer", "archive"]), ANSWER, 0)
    assert (r.kind, r.targets, r.round) == (Kind.RESULT, ["reviewer", "archive"], 0)
    assert route(spec(), ANSWER, 2).targets == ["runner"]


def test_a_reviewer_sends_work_back_while_rounds_are_left() -> None:
    reviewer = spec(role="reviewer", returns_to="writer", max_revisions=1)
    wrong = FinalAnswer(claims=[Claim("x", 1)], revise=["x"])
    r = route(reviewer, wrong, 0)
    assert (r.kind, r.targets, r.round) == (Kind.TASK, ["writer"], 1)
    last = route(reviewer, wrong, 1)  # no rounds left: the result goes on
    assert (last.kind, last.targets, last.round) == (Kind.RESULT, ["runner"], 1)
    assert route(reviewer, ANSWER, 0).kind is Kind.RESULT  # nothing to revise
