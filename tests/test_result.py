"""The result payload's wire shape, and where a result goes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from errorflow.agents.routing import route
from errorflow.core.costs import Costs
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.result import (
    FaultMark,
    Readings,
    ResultPayload,
    failures_of,
    infra_reason,
    round_of,
)
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


def test_a_payload_reads_back_from_its_wire() -> None:
    full = payload(
        policy={"retries": 2.0},
        ended_at=3.5,
        tool_faults={"tools.kpi.faults[0]": 1},
        faults=(FaultMark("corrupt", "writer", ("x",)), FaultMark("slow", delay_s=1.5)),
        withheld="drop",
        delay_s=1.5,
    )
    for p in (payload(), payload(stopped=None).without_costs(), full):
        assert ResultPayload.from_wire(p.to_wire()) == p


@pytest.mark.parametrize(
    "wire",
    [
        {},
        {"round": "2", "answer": 7, "stopped": 3, "t": True, "trace": []},
        {"trace": {"costs": "x", "failures": "x", "policy": [1], "tool_faults": {"a": 1.5}}},
        {"trace": {"faults": [1, {"kind": 2}, {"claims": ["x"]}]}},
    ],
)
def test_a_malformed_payload_reads_as_the_defaults(wire: dict[str, object]) -> None:
    read = ResultPayload.from_wire(wire)
    assert (read.role, read.round, read.stopped, read.costs, read.ended_at) == (
        "",
        0,
        None,
        None,
        None,
    )
    assert (read.failures, read.policy, read.tool_faults, read.faults) == ([], {}, {}, ())
    assert (read.withheld, read.delay_s) == (None, 0.0)
    assert read.answer.abstained  # no answer: an abstention (claims.answer_from_wire)


def test_a_failure_code_the_contract_does_not_name_still_reads_as_a_failure() -> None:
    wire = {"trace": {"failures": ["permission_denied", "gremlins", ["x"]]}}
    assert failures_of(wire) == [
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.INTERNAL_ERROR,
        ErrorCode.INTERNAL_ERROR,
    ]


def test_a_round_is_a_whole_number() -> None:
    assert [round_of({"round": r}) for r in (3, -1, True, 2.0, None)] == [3, -1, 0, 0, 0]


def test_the_first_infrastructure_fault_gives_its_reason() -> None:
    @dataclass
    class Message:
        sender: str
        payload: dict[str, object]

    down = payload(failures=[ErrorCode.INFRA_FAULT], answer=FinalAnswer(text="server gone"))
    quiet = payload(failures=[ErrorCode.INFRA_FAULT], answer=FinalAnswer())
    assert infra_reason([Message("a", payload().to_wire())]) is None
    assert infra_reason([Message("a", down.to_wire())]) == "server gone"
    assert infra_reason([Message("b", quiet.to_wire())]) == "infrastructure fault at b"


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


def test_a_trials_payloads_are_read_once_for_the_envelopes_they_were_read_from() -> None:
    def result(payload: dict[str, object]) -> Envelope:
        return Envelope(
            run_id="r", trial=0, seq=1, sender="writer", recipient="runner",
            kind=Kind.RESULT, trace_id="t", payload=payload,
        )  # fmt: skip

    env = result({"role": "writer", "round": 1, "trace": {"failures": ["timeout"]}})
    readings = Readings()
    first = readings.of(env)
    assert first == ResultPayload.from_wire(env.payload)
    assert readings.of(env) is first  # the scorer's reading, reused by the root cause
    # another envelope under the same id (a copy redacted for the store): read anew
    other = env.model_copy(update={"payload": {"role": "writer", "round": 2}})
    assert readings.of(other).round == 2 and readings.of(other) is not first
    assert Readings().of(env) is not first  # a reading lives with its trial's rows
