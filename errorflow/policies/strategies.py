"""Named strategy presets and how overrides are layered onto them.

Theory of operation
-------------------
A strategy is a complete `PolicyConfig` written down as a plain dict in `PRESETS`.
`build_policy(name, overrides)` deep-merges `overrides` onto a copy of the preset
(nested mappings merge key by key; anything else, lists included, replaces) and
validates the result, so an override can touch one knob (``{"retry":
{"max_attempts": 5}}``) without restating the rest, and an unknown key anywhere is
rejected by pydantic.

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
strategies are compared on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from errorflow.core.taxonomy import RETRYABLE
from errorflow.policies.config import PolicyConfig

DEFAULT_STRATEGY = "resilient"

_RETRYABLE_CODES: list[str] = sorted(str(code) for code in RETRYABLE)

_MODEL_RETRY: dict[str, Any] = {
    "max_attempts": 4,
    "retry_on": _RETRYABLE_CODES,
    "backoff": "exponential",
    "base_s": 0.5,
    "cap_s": 30.0,
    "jitter": "full",
    "honour_retry_after": True,
    "per_call_timeout_s": 30.0,
    # Model calls have no side effects; a key costs nothing and keeps retries on.
    "idempotency_keys": True,
}

_BREAKER_OFF: dict[str, Any] = {
    "enabled": False,
    "failure_threshold": 5,
    "cooldown_s": 30.0,
    "half_open_probes": 1,
    "per_argument": False,
}

# Seed 000's baselines had only the hard step cap; the other guards stay off so
# the presets measure the retry wrapper alone.
_GUARDS_STEP_CAP_ONLY: dict[str, Any] = {
    "max_steps": 25,
    "max_identical_calls": 0,
    "max_consecutive_failures": 0,
    "no_progress_steps": 0,
}

_BUDGET_UNLIMITED: dict[str, Any] = {
    "max_backend_calls_per_step": 0,
    "max_backend_calls_per_task": 0,
    "max_model_calls_per_task": 0,
    "max_tokens_per_task": 0,
    "max_sim_seconds_per_step": 0.0,
    "max_sim_seconds_per_task": 0.0,
}


def _retry(
    *,
    max_attempts: int,
    retry_on: list[str] | str,
    exponential: bool,
    honour_retry_after: bool,
    idempotency_keys: bool,
) -> dict[str, Any]:
    return {
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


def _preset(
    name: str,
    *,
    retry: dict[str, Any],
    breaker: dict[str, Any],
    guards: dict[str, Any],
    error_style: str,
    tell_class: bool,
    stop_on_unrecoverable: bool,
    model_breaker: dict[str, Any],
) -> dict[str, Any]:
    return {
        "strategy": name,
        "retry": retry,
        "breaker": breaker,
        "guards": guards,
        "budget": dict(_BUDGET_UNLIMITED),
        "error_style": error_style,
        "tell_class": tell_class,
        "stop_on_unrecoverable": stop_on_unrecoverable,
        "model_retry": dict(_MODEL_RETRY),
        "model_breaker": model_breaker,
    }


PRESETS: dict[str, dict[str, Any]] = {
    "blind-retry": _preset(
        "blind-retry",
        retry=_retry(
            max_attempts=3,
            retry_on="all",
            exponential=False,
            honour_retry_after=False,
            idempotency_keys=True,
        ),
        breaker=dict(_BREAKER_OFF),
        guards=dict(_GUARDS_STEP_CAP_ONLY),
        error_style="raw",
        tell_class=False,
        stop_on_unrecoverable=False,
        model_breaker=dict(_BREAKER_OFF),
    ),
    "tell-model": _preset(
        "tell-model",
        retry=_retry(
            max_attempts=1,
            retry_on=_RETRYABLE_CODES,
            exponential=False,
            honour_retry_after=False,
            idempotency_keys=False,
        ),
        breaker=dict(_BREAKER_OFF),
        guards=dict(_GUARDS_STEP_CAP_ONLY),
        error_style="raw",
        tell_class=False,
        stop_on_unrecoverable=False,
        model_breaker=dict(_BREAKER_OFF),
    ),
    "classify": _preset(
        "classify",
        retry=_retry(
            max_attempts=3,
            retry_on=_RETRYABLE_CODES,
            exponential=False,
            honour_retry_after=False,
            idempotency_keys=False,
        ),
        breaker=dict(_BREAKER_OFF),
        guards=dict(_GUARDS_STEP_CAP_ONLY),
        error_style="raw",
        tell_class=False,
        stop_on_unrecoverable=True,
        model_breaker=dict(_BREAKER_OFF),
    ),
    "resilient": _preset(
        "resilient",
        retry=_retry(
            max_attempts=4,
            retry_on=_RETRYABLE_CODES,
            exponential=True,
            honour_retry_after=True,
            idempotency_keys=True,
        ),
        # Seed 003: "start with 5 failures + 30 s cooldown, watch a week, then tune".
        breaker={**_BREAKER_OFF, "enabled": True},
        guards={
            "max_steps": 25,
            "max_identical_calls": 3,
            "max_consecutive_failures": 3,
            "no_progress_steps": 2,  # Aider: two rounds without improvement → stop
        },
        error_style="actionable",
        tell_class=True,
        stop_on_unrecoverable=True,
        model_breaker={**_BREAKER_OFF, "enabled": True},
    ),
}


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: `overrides` onto `base`, mappings merged key by key, the rest replaced.

    Neither argument is modified and the result shares no mutable state with them.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def build_policy(
    strategy: str = DEFAULT_STRATEGY, overrides: Mapping[str, Any] | None = None
) -> PolicyConfig:
    """The validated preset `strategy` with `overrides` deep-merged onto it.

    Raises ValueError for an unknown strategy or an override that renames the
    strategy, and pydantic's ValidationError (a ValueError) for unknown keys or
    out-of-bounds values.
    """
    try:
        preset = PRESETS[strategy]
    except KeyError:
        valid = ", ".join(sorted(PRESETS))
        raise ValueError(f"unknown strategy {strategy!r}; valid strategies: {valid}") from None
    overrides = overrides or {}
    # `strategy` records provenance; letting an override rename it would make
    # reports lie about which preset produced the numbers. Equal values are fine,
    # so a dumped config round-trips.
    if "strategy" in overrides and overrides["strategy"] != strategy:
        raise ValueError(
            f"override 'strategy' ({overrides['strategy']!r}) contradicts preset {strategy!r}"
        )
    return PolicyConfig.model_validate(deep_merge(preset, overrides))
