"""Retry decisions for one logical call: whether to try again, and after how long.

Theory of operation
-------------------
The caller runs the loop; this module only answers, after each failed attempt,
"again, and after how many simulated seconds?". It never sleeps and never reads
the clock: randomness comes in as a `random.Random`, time as `budget_left_s`.

`attempt` counts attempts already made, so the decision after the first failure
is asked with ``attempt=1``. A logical call therefore makes at most
`cfg.max_attempts` attempts. The checks run in a fixed order and the first that
refuses names the reason (a stable token for logs and the TUI):

1. ``not_retryable``      the class is not in `cfg.retry_on`;
2. ``non_idempotent``     the tool has side effects and the call carries no
                          idempotency key (or the config does not use keys):
                          a retry could apply the effect twice;
3. ``attempts_exhausted`` `attempt` has reached `cfg.max_attempts`;
4. ``budget_exhausted``   the delay would use up `budget_left_s` (``delay >=
                          budget_left``, leaving no time for the attempt itself).

Otherwise the answer is ``retry=True, reason="retryable"``.

The delay is the server's Retry-After, exactly and uncapped, when one was given
and `cfg.honour_retry_after` is set: the server knows when it will accept the call
and a shorter computed backoff would only hit the wall again (seed 003). If
Retry-After exceeds the remaining budget, rule 4 refuses instead. Otherwise the
delay is `backoff_delay`: ``min(cap, base * 2**(attempt-1))``, drawn uniformly
from ``[0, that]`` under full jitter so concurrent agents do not retry in waves.
The `rng` is consumed only when full jitter is actually drawn, so a seeded run
stays reproducible whatever Retry-After headers it meets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.config import RetryConfig


class Jitter(Protocol):
    """Where full jitter is drawn from (a `random.Random`, or anything drawing the same)."""

    def uniform(self, a: float, b: float) -> float: ...


@dataclass(frozen=True, slots=True)
class RetryDecision:
    retry: bool
    delay_s: float
    reason: str


def backoff_ceiling(cfg: RetryConfig, attempt: int) -> float:
    """The un-jittered delay after failed attempt number `attempt` (1-based)."""
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt}")
    if cfg.backoff == "none":
        return 0.0
    # Clamp the exponent first: 2**99 is fine as an int, but a float overflow is
    # not, and anything past 2**64 is far beyond any cap anyway.
    return min(cfg.cap_s, cfg.base_s * 2.0 ** min(attempt - 1, 64))


def backoff_delay(cfg: RetryConfig, attempt: int, rng: Jitter) -> float:
    """Seconds to wait after failed attempt `attempt` (1 = after the first failure)."""
    ceiling = backoff_ceiling(cfg, attempt)
    if cfg.jitter == "full" and ceiling > 0.0:
        return rng.uniform(0.0, ceiling)
    return ceiling


def decide_retry(
    cfg: RetryConfig,
    *,
    code: ErrorCode,
    attempt: int,
    retry_after_s: float | None,
    rng: Jitter,
    idempotent: bool,
    has_idempotency_key: bool,
    budget_left_s: float | None,
) -> RetryDecision:
    """Whether to retry after failed attempt `attempt`; see the module docstring."""
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt}")
    if not cfg.retries(code):
        return RetryDecision(False, 0.0, "not_retryable")
    if not idempotent and not (cfg.idempotency_keys and has_idempotency_key):
        return RetryDecision(False, 0.0, "non_idempotent")
    if attempt >= cfg.max_attempts:
        return RetryDecision(False, 0.0, "attempts_exhausted")
    if cfg.honour_retry_after and retry_after_s is not None:
        delay = max(0.0, retry_after_s)
    else:
        delay = backoff_delay(cfg, attempt, rng)
    if budget_left_s is not None and delay >= budget_left_s:
        return RetryDecision(False, 0.0, "budget_exhausted")
    return RetryDecision(True, delay, "retryable")
