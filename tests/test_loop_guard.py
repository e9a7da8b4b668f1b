"""Loop guards: identical calls, consecutive failures, step cap, no progress."""

from __future__ import annotations

from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.config import GuardConfig
from errorflow.policies.loop_guard import LoopGuard, canonical_args
from errorflow.policies.strategies import build_policy

OFF = GuardConfig(
    max_steps=100, max_identical_calls=0, max_consecutive_failures=0, no_progress_steps=0
)


def test_canonical_args_ignores_key_order_and_whitespace() -> None:
    assert canonical_args({"b": 1, "a": [1, 2]}) == canonical_args({"a": [1, 2], "b": 1})
    assert canonical_args({"a": 1}) == '{"a":1}'
    assert canonical_args({"a": 1}) != canonical_args({"a": "1"})
    assert canonical_args({"q": "天气"}) == '{"q":"天气"}'


def test_identical_calls_blocked_after_limit_in_a_row() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_identical_calls": 3}))
    for _ in range(3):
        assert g.check_call("search_user", {"name": "alice"}) is None
        g.record_call("search_user", {"name": "alice"}, ok=False)
    v = g.check_call("search_user", {"name": "alice"})
    assert v is not None
    assert v.code is ErrorCode.REPEATED_CALL_BLOCKED
    assert "search_user" in v.message and "3 times" in v.message
    assert v.suggestion
    # Key order does not make a call different.
    assert g.check_call("search_user", {"name": "alice"}) == v
    # A different call is fine, and it breaks the run.
    assert g.check_call("search_user", {"name": "bob"}) is None
    g.record_call("search_user", {"name": "bob"}, ok=True)
    assert g.check_call("search_user", {"name": "alice"}) is None


def test_identical_successful_calls_also_count() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_identical_calls": 2}))
    g.record_call("t", {"x": 1, "y": 2}, ok=True)
    g.record_call("t", {"y": 2, "x": 1}, ok=True)
    v = g.check_call("t", {"x": 1, "y": 2})
    assert v is not None and v.code is ErrorCode.REPEATED_CALL_BLOCKED


def test_interleaved_identical_calls_are_not_in_a_row() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_identical_calls": 2}))
    for _ in range(5):
        g.record_call("a", {}, ok=True)
        g.record_call("b", {}, ok=True)
    assert g.check_call("a", {}) is None


def test_identical_call_guard_off_at_zero() -> None:
    g = LoopGuard(OFF)
    for _ in range(50):
        g.record_call("t", {}, ok=False)
    assert g.check_call("t", {}) is None


def test_consecutive_failures_block_the_tool_with_any_args() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_consecutive_failures": 3}))
    for i in range(3):
        assert g.check_call("fetch", {"id": i}) is None
        g.record_call("fetch", {"id": i}, ok=False)
    v = g.check_call("fetch", {"id": 99})
    assert v is not None
    assert v.code is ErrorCode.CONSECUTIVE_FAILURES
    assert "fetch" in v.message and "3 times" in v.message
    assert g.check_call("other", {"id": 99}) is None
    assert g.consecutive_failures("fetch") == 3


def test_success_resets_consecutive_failures() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_consecutive_failures": 3}))
    for ok in (False, False, True, False, False):
        g.record_call("fetch", {}, ok=ok)
    assert g.consecutive_failures("fetch") == 2
    assert g.check_call("fetch", {}) is None


def test_failures_are_counted_per_tool() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_consecutive_failures": 2}))
    for tool in ("a", "b", "a", "b"):
        g.record_call(tool, {"n": 1}, ok=tool == "b")
    assert g.check_call("a", {}) is not None
    assert g.check_call("b", {}) is None


def test_repeated_call_reported_before_consecutive_failures() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_identical_calls": 2, "max_consecutive_failures": 2}))
    g.record_call("t", {}, ok=False)
    g.record_call("t", {}, ok=False)
    v = g.check_call("t", {})
    assert v is not None and v.code is ErrorCode.REPEATED_CALL_BLOCKED
    v = g.check_call("t", {"other": True})
    assert v is not None and v.code is ErrorCode.CONSECUTIVE_FAILURES


def test_step_limit() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_steps": 3}))
    assert g.end_step(1.0) is None
    assert g.end_step(2.0) is None
    v = g.end_step(3.0)
    assert v is not None and v.code is ErrorCode.STEP_LIMIT
    assert g.steps == 3


def test_no_progress_stops_after_n_steps_without_improvement() -> None:
    g = LoopGuard(OFF.model_copy(update={"no_progress_steps": 2}))
    assert g.end_step(1.0) is None  # improved on the 0.0 baseline
    assert g.end_step(1.0) is None  # equal is not an improvement: 1 stale
    v = g.end_step(0.5)  # worse: 2 stale
    assert v is not None
    assert v.code is ErrorCode.NO_PROGRESS
    assert v.message.startswith("stopped: no_progress")
    assert g.best_progress == 1.0


def test_improvement_resets_the_stale_count() -> None:
    g = LoopGuard(OFF.model_copy(update={"no_progress_steps": 2}))
    for progress in (0.0, 1.0, 1.0, 2.0, 1.5, 3.0):
        assert g.end_step(progress) is None
    assert g.stale_steps == 0
    assert g.end_step(3.0) is None
    v = g.end_step(2.0)
    assert v is not None and v.code is ErrorCode.NO_PROGRESS


def test_progress_compared_with_best_not_last() -> None:
    g = LoopGuard(OFF.model_copy(update={"no_progress_steps": 3}))
    g.end_step(5.0)
    # Recovering from a dip back up to, but not above, the best is not progress.
    assert g.end_step(1.0) is None
    assert g.end_step(4.0) is None
    v = g.end_step(5.0)
    assert v is not None and v.code is ErrorCode.NO_PROGRESS


def test_zero_baseline_counts_a_first_idle_step() -> None:
    g = LoopGuard(OFF.model_copy(update={"no_progress_steps": 2}))
    assert g.end_step(0.0) is None
    v = g.end_step(0.0)
    assert v is not None and v.code is ErrorCode.NO_PROGRESS


def test_none_baseline_lets_the_first_step_set_it() -> None:
    g = LoopGuard(OFF.model_copy(update={"no_progress_steps": 2}), baseline=None)
    assert g.end_step(-5.0) is None  # e.g. minus five failing tests
    assert g.best_progress == -5.0
    assert g.end_step(-4.0) is None
    assert g.end_step(-4.0) is None
    v = g.end_step(-4.0)
    assert v is not None and v.code is ErrorCode.NO_PROGRESS


def test_no_progress_off_at_zero() -> None:
    g = LoopGuard(OFF)
    for _ in range(50):
        assert g.end_step(0.0) is None


def test_step_limit_reported_before_no_progress() -> None:
    g = LoopGuard(OFF.model_copy(update={"max_steps": 2, "no_progress_steps": 2}))
    g.end_step(0.0)
    v = g.end_step(0.0)
    assert v is not None and v.code is ErrorCode.STEP_LIMIT


def test_resilient_guards_stop_a_spinning_agent() -> None:
    g = LoopGuard(build_policy("resilient").guards)
    blocked = None
    calls = 0
    while blocked is None:
        blocked = g.check_call("search_user", {"name": "alice"})
        if blocked is None:
            g.record_call("search_user", {"name": "alice"}, ok=False)
            calls += 1
    assert calls == 3
    assert blocked.code is ErrorCode.REPEATED_CALL_BLOCKED


def test_blind_retry_guards_still_end_the_loop() -> None:
    g = LoopGuard(build_policy("blind-retry").guards)
    for _ in range(50):
        g.record_call("t", {}, ok=False)
        assert g.check_call("t", {}) is None
    verdicts = [g.end_step(0.0) for _ in range(25)]
    assert verdicts[:24] == [None] * 24
    last = verdicts[24]
    assert last is not None and last.code is ErrorCode.STEP_LIMIT
