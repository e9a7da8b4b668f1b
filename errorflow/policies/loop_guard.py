"""Loop guards: the hard lines that make every agent task end.

Theory of operation
-------------------
One `LoopGuard` watches one agent task. Seed 003's three layers, plus Aider's
progress check, each cover what the others miss:

* before a tool call, `check_call` blocks it when
  - the same tool with the same arguments (compared as canonical JSON: sorted
    keys, no whitespace) was called `max_identical_calls` times in a row, across
    all tools → ``REPEATED_CALL_BLOCKED``; any different call breaks the run;
  - the tool has failed `max_consecutive_failures` times in a row →
    ``CONSECUTIVE_FAILURES``. Only a success resets that count, and a blocked call
    is not an attempt, so the tool stays blocked for the rest of the task: the
    model must take another route.
* after a call ran, `record_call` feeds the outcome in. Blocked calls are not
  recorded (they did not run).
* at the end of each agent step, `end_step(progress)` stops the task when the step
  count reaches `max_steps` (``STEP_LIMIT``, checked first because it is
  unconditional) or when progress has stalled (``NO_PROGRESS``).

Progress contract: `progress` is a cumulative score of the whole task so far that
the agent computes, higher is better, e.g. facts gained minus failures suffered.
Only its order matters. The guard remembers the best value seen, starting from
`baseline` (0.0 = "nothing achieved yet"; pass None to let the first step set the
baseline, useful when the score starts elsewhere, like minus the failing tests).
A step "improves" only when its progress is strictly above the best; after
`no_progress_steps` consecutive steps without improvement the task stops with
``stopped: no_progress``.

Limits of 0 switch a guard off, except `max_steps`, which is always on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.config import GuardConfig


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    code: ErrorCode
    message: str
    suggestion: str


# default=str keeps odd values (dates, sets) from crashing the guard; their str() is
# stable enough to spot a literal repeat. One encoder: `json.dumps` with options makes
# one a call.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)


def canonical_args(args: Mapping[str, Any]) -> str:
    """A stable text form of call arguments: equal dicts give equal strings."""
    return _CANONICAL.encode(args)


class LoopGuard:
    def __init__(self, cfg: GuardConfig, *, baseline: float | None = 0.0) -> None:
        self._cfg = cfg
        self._last_call: tuple[str, str] | None = None
        self._run_length = 0
        self._tool_failures: dict[str, int] = {}
        self._steps = 0
        self._best = baseline
        self._stale_steps = 0

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def best_progress(self) -> float | None:
        return self._best

    @property
    def stale_steps(self) -> int:
        return self._stale_steps

    def consecutive_failures(self, tool: str) -> int:
        return self._tool_failures.get(tool, 0)

    def check_call(self, tool: str, args: Mapping[str, Any]) -> GuardVerdict | None:
        """A verdict blocking this call, or None when it may run."""
        limit = self._cfg.max_identical_calls
        if limit and self._last_call == (tool, canonical_args(args)) and self._run_length >= limit:
            return GuardVerdict(
                ErrorCode.REPEATED_CALL_BLOCKED,
                f"blocked: {tool} was already called {self._run_length} times in a row "
                "with these exact arguments; the result will not change",
                "change the arguments, use a different tool, or answer with what you have",
            )
        limit = self._cfg.max_consecutive_failures
        failures = self._tool_failures.get(tool, 0)
        if limit and failures >= limit:
            return GuardVerdict(
                ErrorCode.CONSECUTIVE_FAILURES,
                f"blocked: {tool} failed {failures} times in a row and is disabled "
                "for the rest of this task",
                "use a different tool or answer with what you have",
            )
        return None

    def record_call(self, tool: str, args: Mapping[str, Any], ok: bool) -> None:
        """Feed in the outcome of a call that actually ran."""
        signature = (tool, canonical_args(args))
        # Identical calls loop whether they succeed or not, so `ok` is ignored here.
        if signature == self._last_call:
            self._run_length += 1
        else:
            self._last_call = signature
            self._run_length = 1
        self._tool_failures[tool] = 0 if ok else self._tool_failures.get(tool, 0) + 1

    def end_step(self, progress: float) -> GuardVerdict | None:
        """Close one agent step; a verdict means the task must stop now."""
        self._steps += 1
        if self._best is None or progress > self._best:
            self._best = progress
            self._stale_steps = 0
        else:
            self._stale_steps += 1
        if self._steps >= self._cfg.max_steps:
            return GuardVerdict(
                ErrorCode.STEP_LIMIT,
                f"stopped: step_limit ({self._cfg.max_steps} steps)",
                "answer with what you have",
            )
        limit = self._cfg.no_progress_steps
        if limit and self._stale_steps >= limit:
            return GuardVerdict(
                ErrorCode.NO_PROGRESS,
                f"stopped: no_progress ({self._stale_steps} steps without improvement)",
                "answer with what you have or report that you are stuck",
            )
        return None
