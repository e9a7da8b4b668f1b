"""Injected faults on an agent's model calls: a backend wrapper that fails attempts as a
model server does (429, 529, 5xx, timeouts: `agents.NAME.model.faults`) and crashes the
agent at a model call (`agents.NAME.faults`, kind crash).

A failed attempt raises `InjectedModelError`, a `ModelCallError` with the code, status
and Retry-After the real backend (errorflow/models/anthropic_backend.py) gives the same
answer, so the model gate's retries, Retry-After, breaker and `model_error` events
treat it as they treat a real server's; it is never an infrastructure fault
(`infrastructure` is None), so a call it fails for good is scored as the experiment's.
The failed attempt never reaches the wrapped backend: the simulated model's draws, a
real server, the response cache and a cassette see only the attempts that go through.

A crash raises `InjectedCrash` (not a `ModelCallError`: no retry catches it) up to the
agent's crash path, or, for an agent in a process of its own, hands the crash to
`on_crash`, which announces it and ends the process.

Draws are pure functions of (seed, trial, owner, fault index, call index, attempt), so
the first listed fault that hits fires, a fault's hits do not depend on the others, and
adding a fault to one agent never moves another's. A retry is told from a new call by its
request: the gate sends the same `ModelRequest` object again for each attempt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from errorflow.core.errors import ErrorflowError
from errorflow.core.seeding import stream
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    ModelBackend,
    ModelCallError,
    ModelRequest,
    ModelResponse,
)
from errorflow.protocol.events import AgentCrashed, ModelFaultFired
from errorflow.scenario.crash_fault_model import CrashFault, crash_fires
from errorflow.scenario.model_fault_model import ModelFault
from errorflow.scenario.spec.model import ModelSpec, Scenario

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


def model_fault_path(agent: str, index: int) -> str:
    return f"agents.{agent}.model.faults[{index}]"


def crash_fault_path(agent: str, index: int) -> str:
    return f"agents.{agent}.faults[{index}]"


class InjectedModelError(ModelCallError):
    """One attempt an injected model fault failed (the same type a real failure raises)."""

    def __init__(self, fault: ModelFault, path: str, call: int, attempt: int) -> None:
        status = fault.http_status
        if status is None:
            text = f"Anthropic API request timed out after {fault.hangs_s:g}s"
        else:
            text = f"Anthropic API error HTTP {status} {_API_ERRORS.get(status, 'api_error')}"
        code = ErrorCode.TIMEOUT if status == 408 else CODES[fault.kind]
        super().__init__(
            code, f"injected ({path}): {text}", status=status, retry_after_s=fault.retry_after_s
        )
        self.fault, self.path, self.call, self.attempt = fault, path, call, attempt

    def event(self, agent: str) -> ModelFaultFired:
        return ModelFaultFired(
            agent=agent,
            fault=self.path,
            kind=self.fault.kind,
            status=self.status,
            call=self.call,
            attempt=self.attempt,
        )


@dataclass(frozen=True)
class CrashNotice:
    """Where an injected crash struck: `owner` (the agent, or its revision round) at its
    model call `call` of `trial`."""

    agent: str
    owner: str
    trial: int
    call: int
    fault: str

    def event(self, *, process: bool) -> AgentCrashed:
        return AgentCrashed(agent=self.agent, fault=self.fault, call=self.call, process=process)

    def __str__(self) -> str:
        return f"injected crash ({self.fault}) at model call {self.call} of trial {self.trial}"


class InjectedCrash(ErrorflowError):
    """The agent crashed (injected): raised through the gate and the loop to the agent."""

    def __init__(self, notice: CrashNotice) -> None:
        super().__init__(str(notice))
        self.notice = notice


#: What an agent in a process of its own does with a crash: announce it and die.
OnCrash = Callable[[CrashNotice], Awaitable[None]]


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
    if fault.first_n is not None:
        return nth < fault.first_n
    if fault.p is None:
        return True
    return stream(seed, trial, owner, "model-fault", index, call, attempt).random() < fault.p


@dataclass(frozen=True)
class AgentFaults:
    """The injected faults on one agent's model calls, as the scenario configures them."""

    agent: str
    seed: int
    model: tuple[ModelFault, ...] = ()
    #: (index in `agents.NAME.faults`, fault) of the crash faults.
    crashes: tuple[tuple[int, CrashFault], ...] = ()

    @classmethod
    def of(cls, spec: ModelSpec, scenario: Scenario | None, agent: str, seed: int) -> AgentFaults:
        agent_spec = scenario.agents.get(agent) if scenario is not None else None
        listed: list[object] = list(agent_spec.faults) if agent_spec is not None else []
        crashes = tuple((i, f) for i, f in enumerate(listed) if isinstance(f, CrashFault))
        return cls(agent, seed, tuple(spec.faults), crashes)

    @property
    def configured(self) -> bool:
        return bool(self.model or self.crashes)

    def wrap(
        self, backend: ModelBackend, trial: int, owner: str, on_crash: OnCrash | None = None
    ) -> ModelBackend:
        return FaultyModel(backend, self, trial, owner, on_crash) if self.configured else backend

    def crash_at(self, trial: int, owner: str, call: int) -> CrashNotice | None:
        for index, fault in self.crashes:
            if crash_fires(fault, seed=self.seed, trial=trial, owner=owner, index=index, call=call):
                path = crash_fault_path(self.agent, index)
                return CrashNotice(self.agent, owner, trial, call, path)
        return None

    def failure_at(
        self, trial: int, owner: str, call: int, attempt: int, nth: int
    ) -> InjectedModelError | None:
        seed = self.seed
        for index, fault in enumerate(self.model):
            where = {"trial": trial, "index": index, "call": call, "attempt": attempt, "nth": nth}
            if model_fault_fires(fault, seed=seed, owner=owner, **where):
                return InjectedModelError(fault, model_fault_path(self.agent, index), call, attempt)
        return None


class FaultyModel:
    """A `ModelBackend` whose attempts the agent's injected faults may fail (or crash)."""

    def __init__(
        self,
        inner: ModelBackend,
        faults: AgentFaults,
        trial: int,
        owner: str,
        on_crash: OnCrash | None = None,
    ) -> None:
        self.inner, self.faults, self.trial, self.owner = inner, faults, trial, owner
        self.on_crash = on_crash
        self.calls = 0  # model calls begun (logical calls, retries not counted)
        self.attempts = 0  # attempts of the trial, every call's
        self._attempt = 0  # of the current call
        self._last: ModelRequest | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request is not self._last:  # a new call (a retry sends the same request)
            self._last, self._attempt = request, 0
            self.calls += 1
            notice = self.faults.crash_at(self.trial, self.owner, self.calls - 1)
            if notice is not None:
                if self.on_crash is not None:
                    await self.on_crash(notice)  # an agent process: does not come back
                raise InjectedCrash(notice)
        self._attempt += 1
        nth, self.attempts = self.attempts, self.attempts + 1
        failure = self.faults.failure_at(self.trial, self.owner, self.calls - 1, self._attempt, nth)
        if failure is not None:
            raise failure
        return await self.inner.complete(request)
