"""Stop reasons: typed in the agent, one string on the wire (unchanged)."""

from __future__ import annotations

from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.stop import CRASHED, StopReason


def test_a_policy_stop_is_its_code_on_the_wire() -> None:
    stop = StopReason(ErrorCode.NO_PROGRESS)
    assert (stop.wire, stop.code_value, stop.unrecoverable) == ("no_progress", "no_progress", False)


def test_an_unrecoverable_stop_is_prefixed_on_the_wire() -> None:
    stop = StopReason(ErrorCode.PERMISSION_DENIED, unrecoverable=True)
    assert stop.wire == "unrecoverable:permission_denied"
    assert stop.code_value == "permission_denied"


def test_a_crash_is_not_an_error_code() -> None:
    assert (CRASHED.wire, CRASHED.code_value) == ("crashed", "crashed")


def test_stop_reasons_are_values() -> None:
    assert StopReason(ErrorCode.STEP_LIMIT) == StopReason(ErrorCode.STEP_LIMIT)
    assert StopReason(ErrorCode.STEP_LIMIT) != StopReason(ErrorCode.STEP_LIMIT, True)
    assert len({StopReason(ErrorCode.STEP_LIMIT), StopReason(ErrorCode.STEP_LIMIT)}) == 1


def test_a_stop_reads_back_from_its_wire() -> None:
    for stop in (
        StopReason(ErrorCode.NO_PROGRESS),
        StopReason(ErrorCode.PERMISSION_DENIED, unrecoverable=True),
        CRASHED,
    ):
        assert StopReason.from_wire(stop.wire) == stop
    assert StopReason.from_wire("no_progress").code is ErrorCode.NO_PROGRESS
