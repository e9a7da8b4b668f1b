"""Injected faults on an agent's model calls, applied: a backend wrapper that fails
attempts as a model server does (429, 529, 5xx, timeouts: `agents.NAME.model.faults`)
and crashes the agent at a model call (`agents.NAME.faults`, kind crash). Which attempt
a fault strikes is decided by errorflow.faults.model; this module carries it out.

A failed attempt raises `InjectedModelError`, a `ModelCallError` with the code, status
and Retry-After the real backend (errorflow/models/anthropic/backend.py) gives the same
answer, so the model gate's retries, Retry-After, breaker and `model_error` events
treat it as they treat a real server's; it is never an infrastructure fault
(`infrastructure` is None), so a call it fails for good is scored as the experiment's.
The failed attempt never reaches the wrapped backend: the simulated model's draws, a
real server, the response cache and a cassette see only the attempts that go through.

A crash raises `InjectedCrash` (not a `ModelCallError`: no retry catches it) up to the
agent's crash path, or, for an agent in a process of its own, hands the crash to
`on_crash`, which announces it and ends the process.

A retry is told from a new call by its request: the gate sends the same `ModelRequest`
object again for each attempt.
"""

from __future__ import annotations

from errorflow.faults.crash import InjectedCrash, OnCrash
from errorflow.faults.model import ModelCallFaults, Struck
from errorflow.models.backend import (
    ModelBackend,
    ModelCallError,
    ModelRequest,
    ModelResponse,
)
from errorflow.protocol.events import ModelFaultFired
from errorflow.scenario.spec.model import ModelSpec, Scenario


class InjectedModelError(ModelCallError):
    """One attempt an injected model fault failed (the same type a real failure raises)."""

    def __init__(self, struck: Struck) -> None:
        fault = struck.fault
        super().__init__(
            fault.code,
            f"injected ({struck.path}): {fault.error_text()}",
            status=fault.http_status,
            retry_after_s=fault.retry_after_s,
        )
        self.struck = struck
        self.fault, self.path, self.call, self.attempt = (
            fault,
            struck.path,
            struck.call,
            struck.attempt,
        )

    def event(self, agent: str) -> ModelFaultFired:
        return self.struck.event(agent, self.status)


def model_call_faults(
    spec: ModelSpec, scenario: Scenario | None, agent: str, seed: int
) -> ModelCallFaults:
    """The agent's model faults (`spec.faults`) and crash faults (its `faults`)."""
    agent_spec = scenario.agents.get(agent) if scenario is not None else None
    listed = list(agent_spec.faults) if agent_spec is not None else []
    return ModelCallFaults.of(spec.faults, listed, agent, seed)


def wrap(
    faults: ModelCallFaults,
    backend: ModelBackend,
    trial: int,
    owner: str,
    on_crash: OnCrash | None = None,
) -> ModelBackend:
    """`backend` with the agent's injected faults (itself when there are none)."""
    return FaultyModel(backend, faults, trial, owner, on_crash) if faults.configured else backend


class FaultyModel:
    """A `ModelBackend` whose attempts the agent's injected faults may fail (or crash)."""

    def __init__(
        self,
        inner: ModelBackend,
        faults: ModelCallFaults,
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
        struck = self.faults.failure_at(self.trial, self.owner, self.calls - 1, self._attempt, nth)
        if struck is not None:
            raise InjectedModelError(struck)
        return await self.inner.complete(request)
