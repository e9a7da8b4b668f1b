"""Injected faults of an agent's model (`agents.NAME.model.faults`): the 429s, 529s, 5xxs
and timeouts a model server gives, raised as the real backend raises them
(errorflow/models/model_faults.py), so the model gate's retries, Retry-After and breaker
meet them as they would meet a real server's. An injected fault is the experiment's,
never an infrastructure fault: a call it fails for good is scored like a tool failure.

A fault fires on the first `first_n` attempts of a trial's model calls, or with
probability `p` per attempt, or on every attempt when neither is given (not both), as a
tool's fault does (errorflow/scenario/fault_model.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from errorflow.scenario.fault_model import Probability
from errorflow.scenario.spec.world_model import Strict

ModelFaultKind = Literal["rate_limit", "overloaded", "server_error", "timeout"]

#: The HTTP status each kind answers with (None: no answer at all, the client gave up).
DEFAULT_STATUS: dict[str, int | None] = {
    "rate_limit": 429,
    "overloaded": 529,
    "server_error": 500,
    "timeout": None,
}
#: How long an injected timeout hangs by default (simulated seconds): the real
#: backend's client timeout (errorflow/models/anthropic_backend.py, `timeout_s`).
DEFAULT_TIMEOUT_S = 60.0


class ModelFault(Strict):
    kind: ModelFaultKind
    first_n: int | None = Field(default=None, ge=0, le=1_000_000)
    p: Probability | None = None
    #: server_error: the 5xx it answers (default 500); timeout: 408 for a server that
    #: timed the request out (default: none, the client's own timeout).
    status: int | None = Field(default=None, ge=100, le=599)
    #: The Retry-After the server sends (rate_limit, overloaded, server_error).
    retry_after_s: float | None = Field(default=None, ge=0, le=86_400)
    #: timeout: how long the call hangs before it fails (simulated seconds).
    duration_s: float | None = Field(default=None, ge=0, le=86_400)

    @model_validator(mode="after")
    def _consistent(self) -> ModelFault:
        if self.first_n is not None and self.p is not None:
            raise ValueError("give either first_n or p, not both")
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


def _status_problem(kind: str) -> str:
    fixed = DEFAULT_STATUS[kind]
    if kind in ("rate_limit", "overloaded"):
        return f"kind {kind} always answers {fixed}: leave status out"
    if kind == "timeout":
        return "kind timeout takes status 408 (a server timeout) or none (the client's)"
    return "kind server_error takes a 5xx status (500 ... 599)"
