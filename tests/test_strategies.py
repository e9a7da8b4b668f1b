"""Config models and strategy presets (seed 000's three strategies plus resilient)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from errorflow.core.taxonomy import RETRYABLE, ErrorCode
from errorflow.policies.config import (
    BreakerConfig,
    BudgetConfig,
    GuardConfig,
    PolicyConfig,
    RetryConfig,
)
from errorflow.policies.strategies import (
    DEFAULT_STRATEGY,
    PRESETS,
    build_policy,
    deep_merge,
    merged_data,
    preset_data,
)

# --- config models -------------------------------------------------------------


def test_retry_config_defaults_retry_exactly_the_retryable_classes() -> None:
    cfg = RetryConfig()
    assert set(cfg.retry_on) == set(RETRYABLE)
    assert all(cfg.retries(code) == (code in RETRYABLE) for code in ErrorCode)


def test_retry_on_all_retries_every_code() -> None:
    cfg = RetryConfig(retry_on="all")
    assert all(cfg.retries(code) for code in ErrorCode)


def test_retry_on_parses_code_strings() -> None:
    cfg = RetryConfig.model_validate({"retry_on": ["timeout", "not_found"]})
    assert cfg.retry_on == [ErrorCode.TIMEOUT, ErrorCode.NOT_FOUND]
    assert cfg.retries(ErrorCode.NOT_FOUND)
    assert not cfg.retries(ErrorCode.TRANSIENT)


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (RetryConfig, {"max_attempts": 0}),
        (RetryConfig, {"max_attempts": 101}),
        (RetryConfig, {"per_call_timeout_s": 0}),
        (RetryConfig, {"base_s": -1}),
        (RetryConfig, {"base_s": 10, "cap_s": 5}),
        (RetryConfig, {"retry_on": "some"}),
        (RetryConfig, {"retry_on": ["no_such_code"]}),
        (RetryConfig, {"backoff": "linear"}),
        (RetryConfig, {"jitter": "equal"}),
        (RetryConfig, {"max_attemps": 3}),
        (BreakerConfig, {"failure_threshold": 0}),
        (BreakerConfig, {"half_open_probes": 0}),
        (BreakerConfig, {"cooldown_s": -1}),
        (GuardConfig, {"max_steps": 0}),
        (GuardConfig, {"max_identical_calls": -1}),
        (BudgetConfig, {"max_tokens_per_task": -1}),
        (BudgetConfig, {"max_sim_seconds_per_step": -0.5}),
        (PolicyConfig, {"error_style": "friendly"}),
        (PolicyConfig, {"unknown": 1}),
    ],
)
def test_invalid_values_are_rejected(model: type[Any], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(data)


def test_policy_config_default_is_buildable_and_round_trips() -> None:
    cfg = PolicyConfig()
    assert PolicyConfig.model_validate_json(cfg.model_dump_json()) == cfg


# --- presets -------------------------------------------------------------------


def test_presets_are_the_four_strategies_and_all_validate() -> None:
    assert set(PRESETS) == {"blind-retry", "tell-model", "classify", "resilient"}
    for name in PRESETS:
        assert build_policy(name).strategy == name


def test_default_strategy_is_resilient() -> None:
    assert build_policy().strategy == "resilient"


def test_blind_retry_preset() -> None:
    p = build_policy("blind-retry")
    assert p.retry.retry_on == "all"
    assert p.retry.max_attempts == 3
    assert p.retry.backoff == "none"
    assert p.error_style == "raw"
    assert not p.tell_class
    assert not p.stop_on_unrecoverable
    assert not p.breaker.enabled


def test_tell_model_preset() -> None:
    p = build_policy("tell-model")
    assert p.retry.max_attempts == 1
    assert p.error_style == "raw"
    assert not p.tell_class
    assert not p.breaker.enabled


def test_classify_preset() -> None:
    p = build_policy("classify")
    assert set(p.retry.retry_on) == set(RETRYABLE)
    assert p.retry.max_attempts == 3
    assert p.retry.backoff == "none"
    assert p.error_style == "raw"
    assert not p.tell_class
    assert p.stop_on_unrecoverable
    assert not p.breaker.enabled


def test_resilient_preset() -> None:
    p = build_policy("resilient")
    r = p.retry
    assert set(r.retry_on) == set(RETRYABLE)
    assert (r.max_attempts, r.backoff, r.jitter) == (4, "exponential", "full")
    assert (r.base_s, r.cap_s) == (0.5, 30.0)
    assert r.honour_retry_after and r.idempotency_keys
    b = p.breaker
    assert (b.enabled, b.failure_threshold, b.cooldown_s, b.half_open_probes) == (
        True,
        5,
        30.0,
        1,
    )
    g = p.guards
    assert (g.max_steps, g.max_identical_calls, g.max_consecutive_failures) == (25, 3, 3)
    assert g.no_progress_steps == 2
    assert p.error_style == "actionable"
    assert p.tell_class and p.stop_on_unrecoverable


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_caps_steps_and_retries_model_calls(name: str) -> None:
    p = build_policy(name)
    assert p.guards.max_steps == 25
    assert p.retry.per_call_timeout_s == 30.0
    m = p.model_retry
    assert m.max_attempts == 4
    assert (m.backoff, m.jitter) == ("exponential", "full")
    assert m.per_call_timeout_s == 30.0
    for code in (ErrorCode.RATE_LIMIT, ErrorCode.TRANSIENT, ErrorCode.TIMEOUT):
        assert m.retries(code)
    assert not m.retries(ErrorCode.INVALID_ARGS)


# --- building with overrides ---------------------------------------------------


def test_unknown_strategy_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="blind-retry, classify, resilient, tell-model"):
        build_policy("yolo")


def test_override_merges_nested_keys_and_keeps_siblings() -> None:
    p = build_policy("resilient", {"retry": {"max_attempts": 7}, "breaker": {"cooldown_s": 5}})
    assert p.retry.max_attempts == 7
    assert p.retry.backoff == "exponential"  # sibling kept from the preset
    assert p.retry.cap_s == 30.0
    assert p.breaker.cooldown_s == 5.0
    assert p.breaker.failure_threshold == 5


def test_override_list_replaces_and_all_string_accepted() -> None:
    p = build_policy("classify", {"retry": {"retry_on": ["not_found"]}})
    assert p.retry.retry_on == [ErrorCode.NOT_FOUND]
    p = build_policy("classify", {"retry": {"retry_on": "all"}})
    assert p.retry.retry_on == "all"


def test_override_does_not_mutate_presets() -> None:
    before = build_policy("resilient")
    build_policy("resilient", {"retry": {"max_attempts": 9, "retry_on": ["not_found"]}})
    assert build_policy("resilient") == before
    assert PRESETS["resilient"].retry.max_attempts == 4
    assert preset_data("resilient")["retry"] == PRESETS["resilient"].retry.model_dump(mode="json")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_data_is_what_overrides_merge_onto(name: str) -> None:
    assert PolicyConfig.model_validate(preset_data(name)) == PRESETS[name] == build_policy(name)
    assert merged_data(name, {"retry": {"max_attempts": 2}})["retry"] == {
        **PRESETS[name].retry.model_dump(mode="json"),
        "max_attempts": 2,
    }


def test_configs_are_frozen() -> None:
    p = build_policy("resilient")
    with pytest.raises(ValidationError):
        p.error_style = "raw"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        p.retry.max_attempts = 9  # type: ignore[misc]


def test_the_default_strategy_is_resilient() -> None:
    assert DEFAULT_STRATEGY == "resilient" and build_policy() == PRESETS[DEFAULT_STRATEGY]


@pytest.mark.parametrize(
    "overrides",
    [
        {"retyr": {"max_attempts": 2}},
        {"retry": {"max_attempt": 2}},
        {"guards": {"max_steps": 0}},
        {"breaker": {"half_open_probes": 0}},
    ],
)
def test_bad_overrides_are_rejected(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        build_policy("resilient", overrides)


def test_override_cannot_rename_the_strategy_but_a_dump_round_trips() -> None:
    with pytest.raises(ValueError, match="contradicts"):
        build_policy("classify", {"strategy": "resilient"})
    p = build_policy("classify", {"retry": {"max_attempts": 2}})
    assert build_policy("classify", p.model_dump()) == p


def test_override_accepts_model_instances() -> None:
    p = build_policy("resilient", {"guards": GuardConfig(max_steps=3)})
    assert p.guards.max_steps == 3
    assert p.guards.max_identical_calls == 3  # GuardConfig default, whole model replaced


def test_deep_merge_semantics() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    merged = deep_merge(base, {"a": {"c": [3]}, "e": {"f": 2}})
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 1, "e": {"f": 2}}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}
