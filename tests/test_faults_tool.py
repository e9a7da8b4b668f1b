"""Tool faults (errorflow.faults.tool): the table of kinds, each kind's own fields, the
single shape a kind dumps as (so scenario identities never move), and what each kind's
handler does to a call."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from errorflow.core.tool_errors import CallTimeout, ConnectTimeout, HTTPStatusError
from errorflow.faults.tool import (
    KINDS,
    SILENT_KINDS,
    ToolFault,
    empty_of,
)
from errorflow.faults.tool_base import (
    ADDED_FIELDS,
    SHARED_FIELDS,
    Answered,
    Call,
    Failure,
    Instead,
    ToolFaultBase,
    ToolFit,
    plan_for,
    withheld,
)

FAULT: TypeAdapter[Any] = TypeAdapter(ToolFault)
CALL = Call("kpi_store", "metric_store", timeout_s=5.0)


def fault(**data: Any) -> ToolFaultBase:
    made = FAULT.validate_python(data)
    assert isinstance(made, ToolFaultBase)
    return made


def test_the_table_holds_every_kind_once_in_the_reference_order() -> None:
    assert list(KINDS) == [
        "transient", "timeout", "rate_limit", "bad_args", "permission", "not_found",
        "business_rule", "empty", "partial", "malformed_call", "stale", "wrong_entity",
        "corrupt",
    ]  # fmt: skip
    assert frozenset({"stale", "wrong_entity", "corrupt"}) == SILENT_KINDS
    assert {k for k, c in KINDS.items() if c.stage != "call"} == {"bad_args", "malformed_call"}
    assert all(fault(kind=k).kind == k for k in KINDS)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_dumps_as_the_single_shape_and_loads_back(kind: str) -> None:
    made = fault(kind=kind, p=0.25)
    dump = FAULT.dump_python(made)
    shape = ["kind", "first_n", "p", *SHARED_FIELDS]
    assert list(dump)[: len(shape)] == shape  # a kind added later: its own fields after
    assert set(dump) - set(shape) <= set(KINDS[kind].model_fields) - set(ADDED_FIELDS)
    assert dump["kind"] == kind and dump["p"] == 0.25
    assert all(dump[k] is None for k in ("first_n", *SHARED_FIELDS))
    assert FAULT.dump_json(FAULT.validate_python(dump)) == FAULT.dump_json(made)  # a stored dump


def test_fields_added_later_are_dumped_only_when_set() -> None:
    assert list(FAULT.dump_python(fault(kind="stale", drift=0.2))) == [
        "kind", "first_n", "p", *SHARED_FIELDS, "drift",
    ]  # fmt: skip
    assert not set(ADDED_FIELDS) & set(FAULT.dump_python(fault(kind="stale")))


def test_a_field_another_kind_owns_is_refused_unless_null() -> None:
    assert fault(kind="timeout", reason=None, item_p=None).kind == "timeout"
    with pytest.raises(ValidationError) as info:
        fault(kind="timeout", reason="closed")
    assert [e["loc"] for e in info.value.errors()] == [("timeout", "reason")]
    said = KINDS["timeout"].foreign_key("reason", "closed")
    assert said == "reason applies only to kind 'business_rule', found kind 'timeout'"
    assert KINDS["timeout"].foreign_key("mode", "digits") == (
        "mode applies only to kind 'corrupt', found kind 'timeout'"
    )
    assert KINDS["timeout"].foreign_key("duration_s") is None  # its own
    assert KINDS["timeout"].foreign_key("nonsense") is None  # no kind's: an unknown key


def test_failing_kinds_fail_the_call_as_a_client_library_does() -> None:
    connect = fault(kind="transient").before(CALL)
    assert isinstance(connect, Failure) and isinstance(connect.error, ConnectTimeout)
    assert "kpi-store.internal:443" in str(connect.error)
    http = fault(kind="transient", status=502).before(CALL)
    assert isinstance(http, Failure) and isinstance(http.error, HTTPStatusError)
    limited = fault(kind="rate_limit", retry_after_s=3).before(CALL)
    assert isinstance(limited, Failure) and "Retry-After: 3" in str(limited.error)
    denied = fault(kind="permission", status=401).before(CALL)
    assert isinstance(denied, Failure) and str(denied.error) == "HTTP 401 Unauthorized"
    missing = fault(kind="not_found", error_text="gone").before(CALL)
    assert isinstance(missing, Failure) and str(missing.error) == "gone"


def test_a_timeout_within_the_callers_timeout_is_only_slow() -> None:
    assert fault(kind="timeout", duration_s=2).before(CALL) == Answered(2.0)
    hung = fault(kind="timeout").before(CALL)
    assert isinstance(hung, Failure) and isinstance(hung.error, CallTimeout) and hung.served


def test_refusals_and_empty_answers_come_instead_of_the_tool() -> None:
    refused = fault(kind="business_rule", reason="closed").before(CALL)
    assert refused == Instead({"success": False, "reason": "closed"}, business_error="closed")
    assert fault(kind="empty").before(CALL) == Instead(empty_of("metric_store"), empty=True)


def test_what_the_other_kinds_leave_to_the_call() -> None:
    assert fault(kind="partial").item_failure_p == 0.5
    assert fault(kind="partial", item_p=0.2).item_failure_p == 0.2
    assert fault(kind="timeout").item_failure_p is None
    for kind in ("partial", "stale", "wrong_entity", "corrupt"):
        assert fault(kind=kind).before(CALL) is None
    rng = random.Random(0)
    assert fault(kind="stale", value=7).after(5, rng) == 7
    assert fault(kind="corrupt", mode="unit").after(5, rng) == 5000
    assert fault(kind="wrong_entity").another_entity
    assert fault(kind="malformed_call", mode="missing_field").mangle({"a": 1}, ["a"]) == {}
    assert fault(kind="malformed_call").mangle({"a": "xyz"}, ["a"]) == '{"a": '


def test_a_per_trial_fault_withholds_an_identifier_from_the_first_trials() -> None:
    faults = [fault(kind="timeout"), fault(kind="bad_args", first_n=2)]
    assert [withheld(faults, 1, t, "rev") for t in range(4)] == [1, 1, None, None]
    share = [withheld([fault(kind="bad_args", p=0.5)], 1, t, "rev") for t in range(200)]
    assert 60 < share.count(0) < 140


def test_plans_are_by_stage_and_name_each_faults_place() -> None:
    faults = [fault(kind="malformed_call"), fault(kind="timeout"), fault(kind="bad_args")]
    call, places = plan_for(faults, "call", 1, 0, "a", "kpi")
    assert places == [1] and call.next() is faults[1] and call.fired == 0
    args, places = plan_for(faults, "args", 1, 0, "a", "kpi")
    assert places == [0] and args.next() is faults[0]
    assert plan_for([], "call", 1, 0, "a", "kpi")[0].next() is None


def test_a_kind_says_which_tools_it_cannot_apply_to() -> None:
    sink = ToolFit("out", "report_sink", batch=False, no_other_entity=None)
    single = ToolFit("kpi", "metric_store", batch=False, no_other_entity="one metric")
    assert "report_sink" in (fault(kind="stale").misfit(sink) or "")
    assert "needs another entity" in (fault(kind="wrong_entity").misfit(single) or "")
    assert "expected a batch tool" in (fault(kind="partial").misfit(single) or "")
    assert fault(kind="timeout").misfit(sink) is None
