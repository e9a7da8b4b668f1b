"""Policy configuration: the validated knobs every pure policy reads.

Theory of operation
-------------------
A `PolicyConfig` is a plain, immutable (frozen) description of *how* an agent
handles failure: which classes to retry and how long to wait (`RetryConfig`), when to
stop calling a broken tool (`BreakerConfig`), when to cut a looping agent off
(`GuardConfig`), how much it may spend (`BudgetConfig`) and how hard it may press on
a tool (`BulkheadConfig`, `LimiterConfig`: both off unless a scenario turns them on).
The same models describe the tool edge (`retry`, `breaker`) and the model edge
(`model_retry`, `model_breaker`), because a failing LLM call is just another backend
call.

Configs are data, not behaviour: the policy modules (`retry`, `breaker`,
`loop_guard`, `budget`, `bulkhead`, `rate_limiter`) take a config plus the facts of
the moment and decide.
Every model forbids unknown keys, so a typo in an override fails loudly at build
time instead of silently running the default, and is frozen, so the one config a
scenario builds for an agent can be shared by every trial without one changing it.
Counts where 0 would be meaningless are bounded >= 1; counts and limits documented as
"0 = off/unlimited" are >= 0. Presets live in `strategies.py`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from errorflow.core.taxonomy import RETRYABLE, ErrorCode


def _default_retry_on() -> list[ErrorCode]:
    # Sorted so dumps and reprs are stable across runs (frozenset order is not).
    return sorted(RETRYABLE)


class RetryConfig(BaseModel):
    """How one logical call is retried after a failed attempt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(
        3, ge=1, le=100, description="Total attempts per logical call, including the first."
    )
    retry_on: list[ErrorCode] | Literal["all"] = Field(
        default_factory=_default_retry_on,
        description='Error classes worth another attempt; "all" retries every class.',
    )
    backoff: Literal["none", "exponential"] = Field(
        "exponential", description="Delay schedule between attempts."
    )
    base_s: float = Field(
        0.5, ge=0.0, le=3600.0, description="Delay before the second attempt (exponential)."
    )
    cap_s: float = Field(30.0, ge=0.0, le=3600.0, description="Upper bound of any backoff delay.")
    jitter: Literal["none", "full"] = Field(
        "full", description='"full": draw uniformly from [0, delay] to break retry waves.'
    )
    honour_retry_after: bool = Field(
        True, description="Wait exactly the server's Retry-After instead of the backoff."
    )
    per_call_timeout_s: float = Field(
        30.0, gt=0.0, le=3600.0, description="Simulated seconds before one attempt times out."
    )
    idempotency_keys: bool = Field(
        True,
        description="Send idempotency keys; non-idempotent tools are retried only with one.",
    )

    @model_validator(mode="after")
    def _cap_not_below_base(self) -> RetryConfig:
        if self.backoff == "exponential" and self.cap_s < self.base_s:
            raise ValueError(f"cap_s ({self.cap_s}) must be >= base_s ({self.base_s})")
        return self

    def retries(self, code: ErrorCode) -> bool:
        """Whether this config considers `code` worth another attempt at all."""
        return self.retry_on == "all" or code in self.retry_on


class BreakerConfig(BaseModel):
    """A circuit breaker per tool (or per tool + argument pattern); see `breaker.py`.

    `window` picks what opens the circuit. ``consecutive`` (the default, and the
    presets') opens after `failure_threshold` failed logical
    calls in a row. ``count`` and ``time`` are resilience4j's sliding windows: the
    last `window_size` calls, or the calls of the last `window_size` seconds, open
    the circuit once at least `minimum_calls` of them are in the window and their
    failure rate reaches `failure_rate` or their slow-call rate (calls longer than
    `slow_call_s`) reaches `slow_call_rate`. The rate fields are read only by the
    rate windows; `failure_threshold` only by ``consecutive``.

    `state` pins the breaker: ``forced_open`` refuses every call, ``disabled``
    allows every call and records nothing (like ``enabled: false``, but reported as
    the state ``disabled``). `scope` says how long a breaker lives: ``trial`` (one
    per agent per trial, trials stay independent) or ``run`` (one per agent shared
    by every trial of the run, so an outage seen by one trial protects the next);
    the breaker itself is the same either way, the runtime decides where it lives.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="False: every call is allowed, nothing is tracked.")
    failure_threshold: int = Field(
        5,
        ge=1,
        le=1000,
        description="window consecutive: failed logical calls in a row that open the circuit.",
    )
    cooldown_s: float = Field(
        30.0, ge=0.0, le=86400.0, description="Simulated seconds open before probing."
    )
    half_open_probes: int = Field(
        1,
        ge=1,
        le=100,
        description="Probe calls half-open lets through; consecutive: all must succeed, "
        "count/time: their failure and slow-call rates decide.",
    )
    per_argument: bool = Field(
        False, description="Key breakers by tool + argument pattern instead of tool alone."
    )
    window: Literal["consecutive", "count", "time"] = Field(
        "consecutive",
        description="What opens the circuit: consecutive failures, or the rates over the "
        "last window_size calls (count) or seconds (time).",
    )
    window_size: float = Field(
        10,
        gt=0.0,
        le=86400.0,
        description="count: the last this many calls (a whole number); time: the calls "
        "of the last this many simulated seconds.",
    )
    failure_rate: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="count/time: a failure rate (0-1) at or above this opens the circuit.",
    )
    minimum_calls: int = Field(
        5,
        ge=1,
        le=100000,
        description="count/time: calls in the window before any rate is judged "
        "(count: at most window_size).",
    )
    slow_call_s: float | None = Field(
        None,
        gt=0.0,
        le=86400.0,
        description="count/time: a call lasting longer than this is slow (None = off).",
    )
    slow_call_rate: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="count/time: a slow-call rate (0-1) at or above this opens the circuit.",
    )
    max_half_open_s: float | None = Field(
        None,
        gt=0.0,
        le=86400.0,
        description="Half-open longer than this without a verdict reopens (None = no limit).",
    )
    state: Literal["auto", "forced_open", "disabled"] = Field(
        "auto",
        description="auto: the state machine; forced_open: refuse every call; "
        "disabled: allow every call, record nothing.",
    )
    scope: Literal["trial", "run"] = Field(
        "trial",
        description="trial: a fresh breaker per agent per trial; run: one per agent "
        "shared across the run's trials.",
    )

    @model_validator(mode="after")
    def _window_fields_fit(self) -> BreakerConfig:
        if self.window == "count" and self.window_size != int(self.window_size):
            raise ValueError(
                f"window_size ({self.window_size}) must be a whole number of calls "
                "with window: count"
            )
        if self.window == "consecutive" and self.slow_call_s is not None:
            raise ValueError(
                "slow_call_s needs window: count or time (consecutive counts failures)"
            )
        if self.state == "forced_open" and not self.enabled:
            raise ValueError("state: forced_open needs enabled: true")
        return self


class BulkheadConfig(BaseModel):
    """At most `max_concurrent_calls` calls in flight per tool (per agent); see `bulkhead.py`.

    Off by default, and in every preset. A call that finds the
    bulkhead full waits up to `max_wait_s` simulated seconds for a permit (0: rejected at
    once), like resilience4j's semaphore bulkhead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(False, description="True: limit concurrent calls per tool.")
    max_concurrent_calls: int = Field(
        25, ge=1, le=100000, description="Calls of one tool in flight at once."
    )
    max_wait_s: float = Field(
        0.0,
        ge=0.0,
        le=86400.0,
        description="Simulated seconds a call waits for a free permit (0 = reject at once).",
    )
    per_argument: bool = Field(
        False, description="Key bulkheads by tool + argument pattern instead of tool alone."
    )
    scope: Literal["trial", "run"] = Field(
        "trial", description="trial: one per agent per trial; run: shared across trials."
    )


class LimiterConfig(BaseModel):
    """A client-side rate limiter per tool (per agent); see `rate_limiter.py`.

    resilience4j's fixed-cycle limiter: `limit_for_period` permits per
    `refresh_period_s`, unused permits do not carry over; a call waits up to
    `timeout_s` for a permit of a later cycle, else it is rejected. Off by default.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(False, description="True: limit the call rate per tool.")
    limit_for_period: int = Field(
        50, ge=1, le=1000000, description="Calls permitted per refresh period."
    )
    refresh_period_s: float = Field(
        1.0, gt=0.0, le=86400.0, description="Simulated seconds of one period."
    )
    timeout_s: float = Field(
        5.0,
        ge=0.0,
        le=86400.0,
        description="Simulated seconds a call may wait for a permit (0 = reject at once).",
    )
    per_argument: bool = Field(
        False, description="Key limiters by tool + argument pattern instead of tool alone."
    )
    scope: Literal["trial", "run"] = Field(
        "trial", description="trial: one per agent per trial; run: shared across trials."
    )


class GuardConfig(BaseModel):
    """Loop guards for one agent task. max_steps is mandatory so every loop ends."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int = Field(25, ge=1, le=10000, description="Hard cap on agent steps per task.")
    max_identical_calls: int = Field(
        3,
        ge=0,
        le=1000,
        description="Same tool + args this many times in a row blocks the next (0 = off).",
    )
    max_consecutive_failures: int = Field(
        3, ge=0, le=1000, description="Per-tool consecutive failures that block it (0 = off)."
    )
    no_progress_steps: int = Field(
        2, ge=0, le=1000, description="Steps without a new best progress that stop (0 = off)."
    )


class BudgetConfig(BaseModel):
    """Spending limits for one task; every limit is 0 = unlimited."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_backend_calls_per_step: int = Field(
        0, ge=0, description="Backend (tool) calls within one agent step."
    )
    max_backend_calls_per_task: int = Field(0, ge=0, description="Backend calls in the task.")
    max_model_calls_per_task: int = Field(0, ge=0, description="LLM calls in the task.")
    max_tokens_per_task: int = Field(0, ge=0, description="LLM tokens in the task.")
    max_sim_seconds_per_step: float = Field(
        0.0, ge=0.0, description="Simulated seconds within one agent step."
    )
    max_sim_seconds_per_task: float = Field(
        0.0, ge=0.0, description="Simulated seconds in the task."
    )


class PolicyConfig(BaseModel):
    """Everything an agent needs to know about handling failure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: str = Field("custom", min_length=1, description="Preset this was built from.")
    retry: RetryConfig = Field(default_factory=RetryConfig, description="Tool-call retries.")
    breaker: BreakerConfig = Field(
        default_factory=BreakerConfig, description="Circuit breakers in front of tools."
    )
    guards: GuardConfig = Field(default_factory=GuardConfig, description="Agent loop guards.")
    budget: BudgetConfig = Field(default_factory=BudgetConfig, description="Per-task limits.")
    bulkhead: BulkheadConfig = Field(
        default_factory=BulkheadConfig, description="Concurrent-call limits per tool (off)."
    )
    limiter: LimiterConfig = Field(
        default_factory=LimiterConfig, description="Client-side rate limits per tool (off)."
    )
    error_style: Literal["raw", "actionable"] = Field(
        "actionable",
        description='"raw": the tool error text as is; "actionable": add what to do next.',
    )
    tell_class: bool = Field(
        True, description="The observation names the error class and its retryable flag."
    )
    stop_on_unrecoverable: bool = Field(
        True, description="End the agent loop at once on UNRECOVERABLE classes."
    )
    model_retry: RetryConfig = Field(
        default_factory=lambda: RetryConfig(max_attempts=4),
        description="Retries of failing model calls (429/529/5xx/timeout).",
    )
    model_breaker: BreakerConfig = Field(
        default_factory=lambda: BreakerConfig(enabled=False),
        description="Circuit breaker in front of the model.",
    )
