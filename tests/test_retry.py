"""Pure retry decisions: classes, idempotency, attempts, backoff and Retry-After."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.config import RetryConfig
from errorflow.policies.retry import (
    RetryDecision,
    backoff_ceiling,
    backoff_delay,
    decide_retry,
)
from errorflow.policies.strategies import build_policy

NON_RETRYABLE = [
    ErrorCode.INVALID_ARGS,
    ErrorCode.PERMISSION_DENIED,
    ErrorCode.BUSINESS_RULE,
    ErrorCode.NOT_FOUND,
]
EXP = RetryConfig(max_attempts=10, backoff="exponential", base_s=0.5, cap_s=30.0, jitter="none")


def decide(
    cfg: RetryConfig,
    code: ErrorCode = ErrorCode.TRANSIENT,
    attempt: int = 1,
    *,
    retry_after_s: float | None = None,
    idempotent: bool = True,
    has_key: bool = False,
    budget_left_s: float | None = None,
    seed: int = 0,
) -> RetryDecision:
    return decide_retry(
        cfg,
        code=code,
        attempt=attempt,
        retry_after_s=retry_after_s,
        rng=random.Random(seed),
        idempotent=idempotent,
        has_idempotency_key=has_key,
        budget_left_s=budget_left_s,
    )


# --- backoff -------------------------------------------------------------------


def test_exponential_backoff_doubles_then_caps() -> None:
    rng = random.Random(1)
    delays = [backoff_delay(EXP, attempt, rng) for attempt in range(1, 10)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_no_backoff_is_zero() -> None:
    cfg = RetryConfig(backoff="none", jitter="full")
    assert [backoff_delay(cfg, a, random.Random(0)) for a in (1, 2, 5)] == [0.0, 0.0, 0.0]


def test_huge_attempt_does_not_overflow() -> None:
    assert backoff_ceiling(RetryConfig(max_attempts=100, cap_s=30.0), 100) == 30.0


def test_attempt_must_be_positive() -> None:
    with pytest.raises(ValueError):
        backoff_delay(EXP, 0, random.Random(0))
    with pytest.raises(ValueError):
        decide(EXP, attempt=0)


def test_full_jitter_is_uniform_on_zero_to_ceiling() -> None:
    cfg = RetryConfig(backoff="exponential", base_s=1.0, cap_s=8.0, jitter="full")
    rng = random.Random(42)
    draws = [backoff_delay(cfg, 10, rng) for _ in range(20_000)]  # ceiling is the cap, 8
    assert all(0.0 <= d <= 8.0 for d in draws)
    assert statistics.fmean(draws) == pytest.approx(4.0, abs=0.1)
    # Uniform: a quarter of the draws in each quarter of the range.
    assert sum(d < 2.0 for d in draws) / len(draws) == pytest.approx(0.25, abs=0.02)
    assert max(draws) > 7.9 and min(draws) < 0.1


def test_full_jitter_bound_grows_with_attempt() -> None:
    cfg = RetryConfig(backoff="exponential", base_s=1.0, cap_s=30.0, jitter="full")
    rng = random.Random(7)
    for attempt, bound in [(1, 1.0), (2, 2.0), (3, 4.0)]:
        draws = [backoff_delay(cfg, attempt, rng) for _ in range(2_000)]
        assert max(draws) <= bound
        assert statistics.fmean(draws) == pytest.approx(bound / 2, rel=0.08)


def test_jitter_is_reproducible_with_a_seed() -> None:
    cfg = build_policy("resilient").retry
    a = [backoff_delay(cfg, n, random.Random(3)) for n in range(1, 5)]
    b = [backoff_delay(cfg, n, random.Random(3)) for n in range(1, 5)]
    assert a == b


# --- classes -------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["classify", "resilient"])
@pytest.mark.parametrize("code", NON_RETRYABLE)
def test_classifying_strategies_do_not_retry_non_retryable(strategy: str, code: ErrorCode) -> None:
    d = decide(build_policy(strategy).retry, code)
    assert d == RetryDecision(False, 0.0, "not_retryable")


@pytest.mark.parametrize("code", NON_RETRYABLE)
def test_blind_retry_retries_everything(code: ErrorCode) -> None:
    d = decide(build_policy("blind-retry").retry, code)
    assert d == RetryDecision(True, 0.0, "retryable")


@pytest.mark.parametrize("strategy", ["classify", "resilient", "blind-retry"])
@pytest.mark.parametrize("code", [ErrorCode.TRANSIENT, ErrorCode.TIMEOUT, ErrorCode.RATE_LIMIT])
def test_retryable_classes_are_retried(strategy: str, code: ErrorCode) -> None:
    d = decide(build_policy(strategy).retry, code)
    assert d.retry and d.reason == "retryable"


def test_tell_model_never_retries() -> None:
    d = decide(build_policy("tell-model").retry, ErrorCode.TRANSIENT)
    assert d == RetryDecision(False, 0.0, "attempts_exhausted")


def test_classify_retries_back_to_back() -> None:
    cfg = build_policy("classify").retry
    assert [decide(cfg, attempt=a).delay_s for a in (1, 2)] == [0.0, 0.0]


# --- attempts ------------------------------------------------------------------


def test_attempts_exhausted_at_max_attempts() -> None:
    cfg = RetryConfig(max_attempts=3, backoff="none")
    assert [decide(cfg, attempt=a).retry for a in (1, 2, 3, 4)] == [True, True, False, False]
    assert decide(cfg, attempt=3).reason == "attempts_exhausted"


def test_class_is_checked_before_attempts() -> None:
    cfg = RetryConfig(max_attempts=1)
    assert decide(cfg, ErrorCode.INVALID_ARGS).reason == "not_retryable"


# --- Retry-After ---------------------------------------------------------------


def test_retry_after_takes_precedence_when_honoured() -> None:
    cfg = EXP.model_copy(update={"honour_retry_after": True})
    assert decide(cfg, ErrorCode.RATE_LIMIT, retry_after_s=7.0) == RetryDecision(
        True, 7.0, "retryable"
    )
    # Shorter than the backoff: still exactly Retry-After, not max(..).
    assert decide(cfg, ErrorCode.RATE_LIMIT, attempt=6, retry_after_s=1.0).delay_s == 1.0
    # Longer than the cap: uncapped, the server knows best.
    assert decide(cfg, ErrorCode.RATE_LIMIT, retry_after_s=60.0).delay_s == 60.0


def test_retry_after_ignored_when_not_honoured() -> None:
    cfg = EXP.model_copy(update={"honour_retry_after": False})
    assert decide(cfg, ErrorCode.RATE_LIMIT, attempt=3, retry_after_s=60.0).delay_s == 2.0


def test_negative_retry_after_is_clamped() -> None:
    cfg = EXP.model_copy(update={"honour_retry_after": True})
    assert decide(cfg, retry_after_s=-3.0).delay_s == 0.0


def test_missing_retry_after_falls_back_to_backoff() -> None:
    cfg = EXP.model_copy(update={"honour_retry_after": True})
    assert decide(cfg, attempt=2, retry_after_s=None).delay_s == 1.0


# --- budget --------------------------------------------------------------------


def test_budget_exhausted_when_delay_does_not_fit() -> None:
    cfg = EXP.model_copy(update={"honour_retry_after": True})
    assert decide(cfg, retry_after_s=10.0, budget_left_s=5.0) == RetryDecision(
        False, 0.0, "budget_exhausted"
    )
    assert decide(cfg, attempt=3, budget_left_s=2.0).reason == "budget_exhausted"  # 2 >= 2
    assert decide(cfg, attempt=3, budget_left_s=2.5) == RetryDecision(True, 2.0, "retryable")


def test_zero_budget_refuses_even_immediate_retry() -> None:
    cfg = RetryConfig(backoff="none")
    assert decide(cfg, budget_left_s=0.0).reason == "budget_exhausted"
    assert decide(cfg, budget_left_s=0.1).retry


# --- idempotency ---------------------------------------------------------------


def test_non_idempotent_retried_only_with_key_and_key_support() -> None:
    keyed = RetryConfig(idempotency_keys=True)
    unkeyed = RetryConfig(idempotency_keys=False)
    assert decide(keyed, idempotent=False, has_key=True).retry
    assert decide(keyed, idempotent=False, has_key=False).reason == "non_idempotent"
    assert decide(unkeyed, idempotent=False, has_key=True).reason == "non_idempotent"
    assert decide(unkeyed, idempotent=True, has_key=False).retry


def test_presets_idempotency() -> None:
    assert decide(build_policy("resilient").retry, idempotent=False, has_key=True).retry
    assert not decide(build_policy("classify").retry, idempotent=False, has_key=True).retry


# --- properties ----------------------------------------------------------------

retry_configs = st.builds(
    RetryConfig,
    max_attempts=st.integers(1, 12),
    retry_on=st.sampled_from(["all", [ErrorCode.TRANSIENT, ErrorCode.RATE_LIMIT]]),
    backoff=st.sampled_from(["none", "exponential"]),
    base_s=st.floats(0.0, 5.0),
    cap_s=st.floats(5.0, 60.0),
    jitter=st.sampled_from(["none", "full"]),
    honour_retry_after=st.booleans(),
    idempotency_keys=st.booleans(),
)


@given(
    cfg=retry_configs,
    code=st.sampled_from(list(ErrorCode)),
    retry_afters=st.lists(st.none() | st.floats(0.0, 120.0), min_size=12, max_size=12),
    seed=st.integers(0, 2**32),
    idempotent=st.booleans(),
    has_key=st.booleans(),
)
def test_schedule_never_exceeds_max_attempts_and_delays_are_bounded(
    cfg: RetryConfig,
    code: ErrorCode,
    retry_afters: list[float | None],
    seed: int,
    idempotent: bool,
    has_key: bool,
) -> None:
    rng = random.Random(seed)
    attempts = 1
    while True:
        retry_after = retry_afters[attempts - 1]
        d = decide_retry(
            cfg,
            code=code,
            attempt=attempts,
            retry_after_s=retry_after,
            rng=rng,
            idempotent=idempotent,
            has_idempotency_key=has_key,
            budget_left_s=None,
        )
        if not d.retry:
            assert d.delay_s == 0.0
            break
        if cfg.honour_retry_after and retry_after is not None:
            assert d.delay_s == retry_after
        else:
            assert 0.0 <= d.delay_s <= cfg.cap_s
        attempts += 1
        assert attempts <= cfg.max_attempts
    assert attempts <= cfg.max_attempts


@given(cfg=retry_configs, attempt=st.integers(1, 200), seed=st.integers(0, 2**32))
def test_backoff_delay_within_zero_and_cap(cfg: RetryConfig, attempt: int, seed: int) -> None:
    d = backoff_delay(cfg, attempt, random.Random(seed))
    assert 0.0 <= d <= cfg.cap_s
    assert d <= backoff_ceiling(cfg, attempt)
