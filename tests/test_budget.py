"""Per-task budgets: every limit kind, step resets and time left."""

from __future__ import annotations

import pytest

from errorflow.policies.budget import Budget
from errorflow.policies.config import BudgetConfig


def test_unlimited_budget_never_exhausts() -> None:
    b = Budget(BudgetConfig())
    b.start_step()
    b.charge_backend(10_000)
    b.charge_model(10**9)
    b.charge_time(1e9)
    assert b.exhausted() is None
    assert b.time_left_s() is None


def test_backend_calls_per_task() -> None:
    b = Budget(BudgetConfig(max_backend_calls_per_task=3))
    b.start_step()
    b.charge_backend()
    b.charge_backend()
    assert b.exhausted() is None
    b.start_step()
    b.charge_backend()
    assert b.backend_calls == 3
    assert b.exhausted() == "backend_calls_per_task"


def test_backend_calls_per_step_reset_by_start_step() -> None:
    b = Budget(BudgetConfig(max_backend_calls_per_step=2))
    b.start_step()
    b.charge_backend(2)
    assert b.exhausted() == "backend_calls_per_step"
    b.start_step()
    assert b.backend_calls_this_step == 0
    assert b.backend_calls == 2
    assert b.exhausted() is None


def test_model_calls_per_task() -> None:
    b = Budget(BudgetConfig(max_model_calls_per_task=2))
    b.charge_model(100)
    assert b.exhausted() is None
    b.charge_model(100)
    assert (b.model_calls, b.tokens) == (2, 200)
    assert b.exhausted() == "model_calls_per_task"


def test_tokens_per_task() -> None:
    b = Budget(BudgetConfig(max_tokens_per_task=1000))
    b.charge_model(999)
    assert b.exhausted() is None
    b.charge_model(1)
    assert b.exhausted() == "tokens_per_task"


def test_sim_seconds_per_task() -> None:
    b = Budget(BudgetConfig(max_sim_seconds_per_task=60.0))
    b.start_step()
    b.charge_time(45.0)
    assert b.time_left_s() == 15.0
    b.start_step()
    b.charge_time(15.0)
    assert b.sim_seconds == 60.0
    assert b.time_left_s() == 0.0
    assert b.exhausted() == "sim_seconds_per_task"


def test_sim_seconds_per_step() -> None:
    b = Budget(BudgetConfig(max_sim_seconds_per_step=10.0))
    b.start_step()
    b.charge_time(4.0)
    assert b.time_left_s() == 6.0
    b.charge_time(7.0)
    assert b.time_left_s() == 0.0  # never negative
    assert b.exhausted() == "sim_seconds_per_step"
    b.start_step()
    assert b.sim_seconds_this_step == 0.0
    assert b.time_left_s() == 10.0
    assert b.exhausted() is None


def test_time_left_is_the_smaller_remainder() -> None:
    b = Budget(BudgetConfig(max_sim_seconds_per_step=10.0, max_sim_seconds_per_task=25.0))
    b.start_step()
    b.charge_time(8.0)
    assert b.time_left_s() == 2.0  # step: 2, task: 17
    b.start_step()
    b.charge_time(9.0)
    b.start_step()
    assert b.time_left_s() == 8.0  # step: 10, task: 8
    assert b.steps == 3


def test_task_limits_reported_before_step_limits() -> None:
    b = Budget(BudgetConfig(max_backend_calls_per_step=1, max_backend_calls_per_task=1))
    b.start_step()
    b.charge_backend()
    assert b.exhausted() == "backend_calls_per_task"


def test_negative_charges_are_rejected() -> None:
    b = Budget(BudgetConfig())
    with pytest.raises(ValueError):
        b.charge_backend(-1)
    with pytest.raises(ValueError):
        b.charge_model(-1)
    with pytest.raises(ValueError):
        b.charge_time(-0.1)
    assert (b.backend_calls, b.model_calls, b.tokens, b.sim_seconds) == (0, 0, 0, 0.0)


def test_counters_are_read_only() -> None:
    b = Budget(BudgetConfig())
    with pytest.raises(AttributeError):
        b.tokens = 5  # type: ignore[misc]
