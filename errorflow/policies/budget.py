"""Per-task budgets: how much an agent may spend before it must stop.

Theory of operation
-------------------
One `Budget` accounts for one agent task on two clocks: the task as a whole and
the current step (`start_step` resets the step counters). The caller charges what
it spends (backend calls, model calls with their tokens, simulated seconds) and
asks `exhausted()` before spending more. Charging never refuses: the budget is a
ledger, and the decision to stop belongs to the caller, which may already have
spent the money.

A limit of 0 means unlimited. A limit is exhausted once usage *reaches* it: with
``max_backend_calls_per_task=5``, five calls are allowed and the sixth is not.
`exhausted()` reports task-wide limits before per-step ones, since a task-wide
stop is the stronger one. Reason tokens are the config field names without the
``max_`` prefix (e.g. ``"backend_calls_per_task"``).

`time_left_s()` is what a retry decision may still wait: the smaller of the step
and task remainders, never negative, None when neither is limited.
"""

from __future__ import annotations

from errorflow.policies.config import BudgetConfig


def _check_amount(name: str, amount: float) -> None:
    if amount < 0:
        raise ValueError(f"{name} must be >= 0, got {amount}")


class Budget:
    def __init__(self, cfg: BudgetConfig) -> None:
        self._cfg = cfg
        self._steps = 0
        self._backend_task = 0
        self._backend_step = 0
        self._model_calls = 0
        self._tokens = 0
        self._seconds_task = 0.0
        self._seconds_step = 0.0

    @property
    def config(self) -> BudgetConfig:
        return self._cfg

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def backend_calls(self) -> int:
        return self._backend_task

    @property
    def backend_calls_this_step(self) -> int:
        return self._backend_step

    @property
    def model_calls(self) -> int:
        return self._model_calls

    @property
    def tokens(self) -> int:
        return self._tokens

    @property
    def sim_seconds(self) -> float:
        return self._seconds_task

    @property
    def sim_seconds_this_step(self) -> float:
        return self._seconds_step

    def start_step(self) -> None:
        self._steps += 1
        self._backend_step = 0
        self._seconds_step = 0.0

    def charge_backend(self, n: int = 1) -> None:
        _check_amount("n", n)
        self._backend_task += n
        self._backend_step += n

    def charge_model(self, tokens: int) -> None:
        """One model call that used `tokens` tokens (prompt + completion)."""
        _check_amount("tokens", tokens)
        self._model_calls += 1
        self._tokens += tokens

    def charge_time(self, seconds: float) -> None:
        _check_amount("seconds", seconds)
        self._seconds_task += seconds
        self._seconds_step += seconds

    def time_left_s(self) -> float | None:
        remainders = [
            limit - used
            for limit, used in (
                (self._cfg.max_sim_seconds_per_step, self._seconds_step),
                (self._cfg.max_sim_seconds_per_task, self._seconds_task),
            )
            if limit > 0
        ]
        return max(0.0, min(remainders)) if remainders else None

    def exhausted(self) -> str | None:
        """The first exhausted limit's reason token, or None while all have room."""
        cfg = self._cfg
        checks: tuple[tuple[str, float, float], ...] = (
            ("backend_calls_per_task", cfg.max_backend_calls_per_task, self._backend_task),
            ("model_calls_per_task", cfg.max_model_calls_per_task, self._model_calls),
            ("tokens_per_task", cfg.max_tokens_per_task, self._tokens),
            ("sim_seconds_per_task", cfg.max_sim_seconds_per_task, self._seconds_task),
            ("backend_calls_per_step", cfg.max_backend_calls_per_step, self._backend_step),
            ("sim_seconds_per_step", cfg.max_sim_seconds_per_step, self._seconds_step),
        )
        for reason, limit, used in checks:
            if limit > 0 and used >= limit:
                return reason
        return None
