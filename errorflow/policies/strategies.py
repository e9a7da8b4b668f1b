"""Named strategy presets and how overrides are layered onto them.

Theory of operation
-------------------
A strategy is a complete, validated `PolicyConfig` in `PRESETS`.
`build_policy(name, overrides)` deep-merges `overrides` onto the preset's data
(`preset_data`: nested mappings merge key by key; anything else, lists included,
replaces) and validates the result, so an override can touch one knob (``{"retry":
{"max_attempts": 5}}``) without restating the rest, and an unknown key anywhere is
rejected by pydantic. Overrides are free data (a scenario's YAML), typed as such:
only the validation says what they mean.

The first three presets reproduce seed 000's experiment, where the agent loop is
identical and only the wrapper around the tool changes:

* ``blind-retry`` retries every failure 3 times back to back and tells the model
  nothing about classes. It also sends idempotency keys, so "every failure" holds
  for non-idempotent tools too.
* ``tell-model`` never retries; the raw error goes to the model, which decides.
* ``classify`` retries only RETRYABLE classes (3 attempts, no backoff, no
  Retry-After), hands argument errors to the model unchanged and ends the loop on
  UNRECOVERABLE ones. Without idempotency keys it does not retry non-idempotent
  tools.

``resilient`` (the default) is classify plus what seed 003 recommends for
production: exponential backoff with full jitter, Retry-After, idempotency keys, a
per-tool breaker (5 failures, 30 s cooldown), loop guards and actionable errors.

Every preset keeps max_steps 25 so even blind-retry loops end, and retries model
calls (429/529/5xx/timeout) resilient-style: the model edge is not what the
strategies are compared on. Every breaker is the consecutive-failure kind with
``scope: trial``, and no preset turns on a bulkhead or a client-side rate limiter:
what the presets are compared on stays the strategies themselves.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Literal

from errorflow.core.taxonomy import RETRYABLE
from errorflow.policies.config import (
    BreakerConfig,
    BudgetConfig,
    BulkheadConfig,
    GuardConfig,
    LimiterConfig,
    PolicyConfig,
    RetryConfig,
)

#: The strategy an agent uses when its scenario names none.
DEFAULT_STRATEGY = "resilient"

_RETRYABLE_CODES: list[str] = sorted(str(code) for code in RETRYABLE)


def _retry(
    *,
    max_attempts: int,
    retry_on: list[str] | Literal["all"],
    exponential: bool,
    honour_retry_after: bool,
    idempotency_keys: bool,
) -> RetryConfig:
    return RetryConfig.model_validate(
        {
            "max_attempts": max_attempts,
            "retry_on": retry_on,
            "backoff": "exponential" if exponential else "none",
            "base_s": 0.5,
            "cap_s": 30.0,
            "jitter": "full" if exponential else "none",
            "honour_retry_after": honour_retry_after,
            "per_call_timeout_s": 30.0,
            "idempotency_keys": idempotency_keys,
        }
    )


# Model calls have no side effects; a key costs nothing and keeps retries on.
_MODEL_RETRY = _retry(
    max_attempts=4,
    retry_on=_RETRYABLE_CODES,
    exponential=True,
    honour_retry_after=True,
    idempotency_keys=True,
)


def _breaker(*, enabled: bool) -> BreakerConfig:
    # The rate-window knobs (window_size, failure_rate, ...) keep their defaults: a
    # consecutive window never reads them.
    return BreakerConfig(
        enabled=enabled,
        failure_threshold=5,
        cooldown_s=30.0,
        half_open_probes=1,
        per_argument=False,
        window="consecutive",
        max_half_open_s=None,
        state="auto",
        scope="trial",
    )


# Seed 000's baselines had only the hard step cap; the other guards stay off so
# the presets measure the retry wrapper alone.
_GUARDS_STEP_CAP_ONLY = GuardConfig(
    max_steps=25,
    max_identical_calls=0,
    max_consecutive_failures=0,
    no_progress_steps=0,
)

# Bulkheads and client-side rate limits are off in every preset (the presets compare
# strategies, not capacity limits); a scenario turns them on.
_BULKHEAD_OFF = BulkheadConfig(enabled=False)
_LIMITER_OFF = LimiterConfig(enabled=False)

_BUDGET_UNLIMITED = BudgetConfig(
    max_backend_calls_per_step=0,
    max_backend_calls_per_task=0,
    max_model_calls_per_task=0,
    max_tokens_per_task=0,
    max_sim_seconds_per_step=0.0,
    max_sim_seconds_per_task=0.0,
)


def _preset(
    name: str,
    *,
    retry: RetryConfig,
    breaker: BreakerConfig,
    guards: GuardConfig,
    error_style: Literal["raw", "actionable"],
    tell_class: bool,
    stop_on_unrecoverable: bool,
    model_breaker: BreakerConfig,
) -> PolicyConfig:
    return PolicyConfig(
        strategy=name,
        retry=retry,
        breaker=breaker,
        guards=guards,
        budget=_BUDGET_UNLIMITED,
        bulkhead=_BULKHEAD_OFF,
        limiter=_LIMITER_OFF,
        error_style=error_style,
        tell_class=tell_class,
        stop_on_unrecoverable=stop_on_unrecoverable,
        model_retry=_MODEL_RETRY,
        model_breaker=model_breaker,
    )


PRESETS: dict[str, PolicyConfig] = {
    preset.strategy: preset
    for preset in (
        _preset(
            "blind-retry",
            retry=_retry(
                max_attempts=3,
                retry_on="all",
                exponential=False,
                honour_retry_after=False,
                idempotency_keys=True,
            ),
            breaker=_breaker(enabled=False),
            guards=_GUARDS_STEP_CAP_ONLY,
            error_style="raw",
            tell_class=False,
            stop_on_unrecoverable=False,
            model_breaker=_breaker(enabled=False),
        ),
        _preset(
            "tell-model",
            retry=_retry(
                max_attempts=1,
                retry_on=_RETRYABLE_CODES,
                exponential=False,
                honour_retry_after=False,
                idempotency_keys=False,
            ),
            breaker=_breaker(enabled=False),
            guards=_GUARDS_STEP_CAP_ONLY,
            error_style="raw",
            tell_class=False,
            stop_on_unrecoverable=False,
            model_breaker=_breaker(enabled=False),
        ),
        _preset(
            "classify",
            retry=_retry(
                max_attempts=3,
                retry_on=_RETRYABLE_CODES,
                exponential=False,
                honour_retry_after=False,
                idempotency_keys=False,
            ),
            breaker=_breaker(enabled=False),
            guards=_GUARDS_STEP_CAP_ONLY,
            error_style="raw",
            tell_class=False,
            stop_on_unrecoverable=True,
            model_breaker=_breaker(enabled=False),
        ),
        _preset(
            "resilient",
            retry=_retry(
                max_attempts=4,
                retry_on=_RETRYABLE_CODES,
                exponential=True,
                honour_retry_after=True,
                idempotency_keys=True,
            ),
            # Seed 003: "start with 5 failures + 30 s cooldown, watch a week, then tune".
            breaker=_breaker(enabled=True),
            guards=GuardConfig(
                max_steps=25,
                max_identical_calls=3,
                max_consecutive_failures=3,
                no_progress_steps=2,  # Aider: two rounds without improvement → stop
            ),
            error_style="actionable",
            tell_class=True,
            stop_on_unrecoverable=True,
            model_breaker=_breaker(enabled=True),
        ),
    )
}


def deep_merge(base: Mapping[str, object], overrides: Mapping[str, object]) -> dict[str, object]:
    """A new dict: `overrides` onto `base`, mappings merged key by key, the rest replaced.

    Neither argument is modified and the result shares no mutable state with them.
    """
    merged: dict[str, object] = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def preset_data(strategy: str) -> dict[str, object]:
    """The preset as the plain data overrides are merged onto (KeyError if unknown)."""
    data: dict[str, object] = PRESETS[strategy].model_dump(mode="json")
    return data


def merged_data(strategy: str, overrides: Mapping[str, object]) -> dict[str, object]:
    """What `build_policy(strategy, overrides)` validates: where its errors point."""
    return deep_merge(preset_data(strategy), overrides)


def build_policy(
    strategy: str = DEFAULT_STRATEGY, overrides: Mapping[str, object] | None = None
) -> PolicyConfig:
    """The validated preset `strategy` with `overrides` deep-merged onto it.

    Raises ValueError for an unknown strategy or an override that renames the
    strategy, and pydantic's ValidationError (a ValueError) for unknown keys or
    out-of-bounds values.
    """
    if strategy not in PRESETS:
        valid = ", ".join(sorted(PRESETS))
        raise ValueError(f"unknown strategy {strategy!r}; valid strategies: {valid}")
    overrides = overrides or {}
    # `strategy` records provenance; letting an override rename it would make
    # reports lie about which preset produced the numbers. Equal values are fine,
    # so a dumped config round-trips.
    if "strategy" in overrides and overrides["strategy"] != strategy:
        raise ValueError(
            f"override 'strategy' ({overrides['strategy']!r}) contradicts preset {strategy!r}"
        )
    return PolicyConfig.model_validate(merged_data(strategy, overrides))
