"""Policy decisions counted per agent (errorflow.agents.policy_tally) and shown
(errorflow.reports.policy_table)."""

from __future__ import annotations

from errorflow.agents.policy_tally import PolicyTally
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.events import (
    BreakerChange,
    GuardBlock,
    LoopStop,
    RetriesExhausted,
    RetryScheduled,
    ToolCallEvent,
)
from errorflow.reports.policy_table import policy_rows


def test_every_decision_is_counted() -> None:
    t = PolicyTally()
    for delay in (0.5, 1.25):
        t.add(
            RetryScheduled(agent="a", tool="q", attempt=1, code=ErrorCode.TRANSIENT, delay_s=delay)
        )
    t.add(RetriesExhausted(agent="a", tool="q", attempts=3, code=ErrorCode.TRANSIENT, reason="x"))
    for to in ("open", "half_open", "closed", "open"):
        t.add(BreakerChange.model_validate(
            {"agent": "a", "tool": "q", "from": "closed", "to": to, "at": 1.0, "reason": "r"}
        ))  # fmt: skip
    t.add(GuardBlock(agent="a", tool="q", code=ErrorCode.REPEATED_CALL_BLOCKED, message="m"))
    t.add(LoopStop(agent="a", code="step_limit", stopped="step_limit", steps=25))
    t.add(ToolCallEvent(agent="a", tool="q", call_id="c", args={}, ok=False,
                        code=ErrorCode.CIRCUIT_OPEN, attempts=0))  # fmt: skip
    t.add(ToolCallEvent(agent="a", tool="q", call_id="d", args={}, ok=True, attempts=1))
    assert t.to_wire() == {
        "backoff_s": 1.75,
        "breaker_closed": 1.0,
        "breaker_half_open": 1.0,
        "breaker_open": 2.0,
        "guard_repeated_call_blocked": 1.0,
        "refused_open": 1.0,
        "retries": 2.0,
        "retries_exhausted": 1.0,
        "stop_step_limit": 1.0,
    }
    assert PolicyTally().to_wire() == {}


def test_the_table_rows() -> None:
    [row] = policy_rows(
        {"researcher": {"retries": 4, "retries_exhausted": 1, "backoff_s": 2.5, "breaker_open": 1,
                        "refused_open": 3, "guard_no_progress": 1, "stop_no_progress": 1}}
    )  # fmt: skip
    assert row == ["researcher", "4, 2.5s, 1 out", "1/0/0", "open 3", "no_progress 1",
                   "no_progress 1"]  # fmt: skip
