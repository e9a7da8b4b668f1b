"""Injected faults of an agent's model (`agents.NAME.model.faults`): the 429s, 529s, 5xxs
and timeouts a model server gives, and where they (and the agent's crash faults) strike.

The model backend wrapper (errorflow/models/model_faults.py) raises a failure as the
real backend raises it, so the model gate's retries, Retry-After and breaker meet it as
they would meet a real server's. An injected fault is the experiment's, never an
infrastructure fault: a call it fails for good is scored like a tool failure.

A fault fires on the first `first_n` attempts of a trial's model calls, or with
probability `p` per attempt, or on every attempt when neither is given (not both), as a
tool's fault does. Draws are pure functions of (seed, trial, owner, fault index, call
index, attempt), so the first listed fault that hits fires, a fault's hits do not
depend on the others, and adding a fault to one agent never moves another's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from errorflow.core.seeding import stream
from errorflow.core.taxonomy import ErrorCode
from errorflow.faults.crash import (
    CrashFault,
    CrashNotice,
    crash_fault_path,
    crash_fires,
)
from errorflow.faults.trigger import Trigger
from errorflow.protocol.events import ModelFaultFired

ModelFaultKind = Literal["rate_limit", "overloaded", "server_error", "timeout"]

#: The HTTP status each kind answers with (None: no answer at all, the client gave up).
DEFAULT_STATUS: dict[str, int | None] = {
    "rate_limit": 429,
    "overloaded": 529,
    "server_error": 500,
    "timeout": None,
}
#: How long an injected timeout hangs by default (simulated seconds): the real
#: backend's client timeout (errorflow/models/anthropic/backend.py, `timeout_s`).
DEFAULT_TIMEOUT_S = 60.0
#: The code each kind gets (as `classify_status` of the real backend classifies its
#: status; a timeout is the client's `APITimeoutError`).
CODES = {
    "rate_limit": ErrorCode.RATE_LIMIT,
    "overloaded": ErrorCode.TRANSIENT,
    "server_error": ErrorCode.TRANSIENT,
    "timeout": ErrorCode.TIMEOUT,
}
#: The error type and message an Anthropic server sends with each status.
_API_ERRORS = {
    429: "rate_limit_error: Number of request tokens has exceeded your rate limit",
    529: "overloaded_error: Overloaded",
    408: "timeout_error: Request timed out",
}


class ModelFault(Trigger):
    kind: ModelFaultKind
    #: server_error: the 5xx it answers (default 500); timeout: 408 for a server that
    #: timed the request out (default: none, the client's own timeout).
    status: int | None = Field(default=None, ge=100, le=599)
    #: The Retry-After the server sends (rate_limit, overloaded, server_error).
    retry_after_s: float | None = Field(default=None, ge=0, le=86_400)
    #: timeout: how long the call hangs before it fails (simulated seconds).
    duration_s: float | None = Field(default=None, ge=0, le=86_400)

    @model_validator(mode="after")
    def _consistent(self) -> ModelFault:
        if self.status is not None:
            allowed = {"server_error": range(500, 600), "timeout": range(408, 409)}.get(self.kind)
            if allowed is None or self.status not in allowed:
                raise ValueError(_status_problem(self.kind))
        if self.retry_after_s is not None and self.kind == "timeout":
            raise ValueError("a timeout has no answer, so no retry_after_s")
        if self.duration_s is not None and self.kind != "timeout":
            raise ValueError("duration_s is for kind timeout only")
        return self

    @property
    def http_status(self) -> int | None:
        return self.status if self.status is not None else DEFAULT_STATUS[self.kind]

    @property
    def hangs_s(self) -> float:
        """Simulated seconds the attempt takes before it fails (a timeout only)."""
        if self.kind != "timeout":
            return 0.0
        return self.duration_s if self.duration_s is not None else DEFAULT_TIMEOUT_S

    @property
    def code(self) -> ErrorCode:
        return ErrorCode.TIMEOUT if self.http_status == 408 else CODES[self.kind]

    def error_text(self) -> str:
        """The error as the real backend words it."""
        status = self.http_status
        if status is None:
            return f"Anthropic API request timed out after {self.hangs_s:g}s"
        return f"Anthropic API error HTTP {status} {_API_ERRORS.get(status, 'api_error')}"


def _status_problem(kind: str) -> str:
    fixed = DEFAULT_STATUS[kind]
    if kind in ("rate_limit", "overloaded"):
        return f"kind {kind} always answers {fixed}: leave status out"
    if kind == "timeout":
        return "kind timeout takes status 408 (a server timeout) or none (the client's)"
    return "kind server_error takes a 5xx status (500 ... 599)"


def model_fault_path(agent: str, index: int) -> str:
    return f"agents.{agent}.model.faults[{index}]"


def model_fault_fires(
    fault: ModelFault,
    *,
    seed: int,
    trial: int,
    owner: str,
    index: int,
    call: int,
    attempt: int,
    nth: int,
) -> bool:
    """Whether `fault` (the `index`-th of the agent's model) fails attempt `attempt` of
    model call `call`, the trial's `nth` attempt (0: the first). Pure."""
    return fault.fires(
        nth, lambda: stream(seed, trial, owner, "model-fault", index, call, attempt).random()
    )


@dataclass(frozen=True)
class Struck:
    """One attempt an injected model fault fails: which fault (its place), where."""

    fault: ModelFault
    path: str
    call: int
    attempt: int

    def event(self, agent: str, status: int | None) -> ModelFaultFired:
        return ModelFaultFired(
            agent=agent,
            fault=self.path,
            kind=self.fault.kind,
            status=status,
            call=self.call,
            attempt=self.attempt,
        )


@dataclass(frozen=True)
class ModelCallFaults:
    """The injected faults on one agent's model calls, as the scenario configures them."""

    agent: str
    seed: int
    model: tuple[ModelFault, ...] = ()
    #: (index in `agents.NAME.faults`, fault) of the crash faults.
    crashes: tuple[tuple[int, CrashFault], ...] = ()

    @classmethod
    def of(
        cls, model: Sequence[ModelFault], agent_faults: Sequence[object], agent: str, seed: int
    ) -> ModelCallFaults:
        crashes = tuple((i, f) for i, f in enumerate(agent_faults) if isinstance(f, CrashFault))
        return cls(agent, seed, tuple(model), crashes)

    @property
    def configured(self) -> bool:
        return bool(self.model or self.crashes)

    def crash_at(self, trial: int, owner: str, call: int) -> CrashNotice | None:
        for index, fault in self.crashes:
            if crash_fires(fault, seed=self.seed, trial=trial, owner=owner, index=index, call=call):
                path = crash_fault_path(self.agent, index)
                return CrashNotice(self.agent, owner, trial, call, path)
        return None

    def failure_at(
        self, trial: int, owner: str, call: int, attempt: int, nth: int
    ) -> Struck | None:
        seed = self.seed
        for index, fault in enumerate(self.model):
            where = {"trial": trial, "index": index, "call": call, "attempt": attempt, "nth": nth}
            if model_fault_fires(fault, seed=seed, owner=owner, **where):
                return Struck(fault, model_fault_path(self.agent, index), call, attempt)
        return None
