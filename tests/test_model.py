"""The model interface's own behaviour: what the turns tell a backend."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    ModelCallError,
    ModelResponse,
    ObservationTurn,
    Usage,
)


@pytest.mark.parametrize(
    ("content", "is_error"),
    [
        ({"ok": True, "result": None}, False),
        ({"ok": False, "code": "timeout"}, True),
        ({"error": "Error: connect ETIMEDOUT"}, True),  # a raw error says nothing of ok
        ({}, True),
    ],
)
def test_an_observation_is_an_error_unless_it_says_ok(
    content: dict[str, JsonValue], is_error: bool
) -> None:
    assert ObservationTurn("c1", "query_metric", content).is_error is is_error


def test_a_response_defaults_to_an_empty_end_of_turn() -> None:
    response = ModelResponse()
    assert (response.calls, response.final, response.stop_reason) == ([], None, "end_turn")
    assert response.usage == Usage(0, 0)


def test_a_model_call_error_carries_its_code_status_and_retry_after() -> None:
    err = ModelCallError(ErrorCode.RATE_LIMIT, "slow down", status=429, retry_after_s=2.0)
    assert (err.code, err.status, err.retry_after_s, str(err)) == (
        ErrorCode.RATE_LIMIT,
        429,
        2.0,
        "slow down",
    )
    plain = ModelCallError(ErrorCode.MODEL_ERROR, "bad reply")
    assert (plain.status, plain.retry_after_s) == (None, None)
