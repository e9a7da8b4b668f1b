"""Model-call resilience: a failing model call (429, 529, 5xx, timeout) goes through the
same attempt loop, pure retry and breaker machinery as a tool call
(`errorflow.agents.attempts`). Unlike a tool call, the breaker is asked before every
attempt, every failed attempt is a `model_error` event, and a call that fails for good
raises its `ModelCallError` to the agent.

A call that fails for good because of the infrastructure (its last attempt could not
reach the server, had the key refused or found no such model; or the circuit those
attempts opened refused it) is raised as an `infra_fault`: the experiment did not
happen, and the agent's trial is not scored. Retries still follow the attempt's code.

An attempt an injected fault failed (errorflow/models/model_faults.py) is announced as a
`model_fault` event before its `model_error`; an injected crash as `agent_crashed`,
and it goes on up to the agent (no retry catches it)."""

from __future__ import annotations

import dataclasses
import json

from errorflow.agents.attempts import (
    Answered,
    AttemptLoop,
    Failed,
    ObservedBreaker,
    RetryTerms,
)
from errorflow.core.redact import redact
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.faults.crash import InjectedCrash
from errorflow.models.backend import (
    ModelBackend,
    ModelCallError,
    ModelRequest,
    ModelResponse,
)
from errorflow.models.model_faults import InjectedModelError
from errorflow.models.model_usage import cache_read, cache_write
from errorflow.policies.breaker import BreakerBank
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.config import PolicyConfig
from errorflow.policies.retry import Jitter, RetryDecision
from errorflow.protocol.events import Emit, ModelCall, ModelError

#: The name the model's breaker and failures go by (events, errors, costs).
MODEL = "model"

#: The longest request or reply text a `model_call` event keeps (the rest is cut).
MAX_CONTENT_CHARS = 16_000


def content_text(part: ModelRequest | ModelResponse) -> str:
    """A request or a reply as JSON text for a trace: every turn, call and claim,
    redacted (keys, tokens, the `redact` patterns), clipped to `MAX_CONTENT_CHARS`."""
    text = redact(json.dumps(dataclasses.asdict(part), default=str, ensure_ascii=False))
    return text if len(text) <= MAX_CONTENT_CHARS else text[: MAX_CONTENT_CHARS - 3] + "..."


class ModelGate:
    def __init__(
        self,
        backend: ModelBackend,
        policy: PolicyConfig,
        clock: SimClock,
        rng: Jitter,
        budget: Budget,
        emit: Emit,
        *,
        agent: str,
        record_content: bool = False,
    ) -> None:
        self.backend, self.policy, self.clock, self.budget = backend, policy, clock, budget
        self.record_content = record_content
        self.emit, self.agent = emit, agent
        self.breakers = BreakerBank(policy.model_breaker)
        self.breaker = ObservedBreaker(
            self.breakers, MODEL, None, clock=clock, agent=agent, emit=emit
        )
        # A model call has no side effect to apply twice: always safe to retry.
        self._terms = RetryTerms(policy.model_retry, idempotent=True, has_idempotency_key=False)
        self._loop = AttemptLoop(clock=clock, rng=rng, budget=budget)
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        #: Of `input_tokens`, what a real model's prompt cache read and wrote.
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0

    @property
    def retries(self) -> int:
        return self._loop.retries

    async def complete(self, request: ModelRequest) -> ModelResponse:
        completion = _Completion(self, request)
        outcome = await self._loop.run(completion, terms=self._terms, breaker=self.breaker)
        if isinstance(outcome.result, Failed):
            failed = outcome.result
            if completion.infrastructure is not None:
                reason = completion.infrastructure
                raise ModelCallError(
                    ErrorCode.INFRA_FAULT,
                    reason,
                    status=failed.failure.http_status,
                    infrastructure=reason,
                )
            if failed.cause is not None:
                raise failed.cause
            raise ModelCallError(failed.failure.code, failed.failure.raw)
        response = outcome.result.value
        usage = response.usage
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += cache_read(usage)
        self.cache_write_tokens += cache_write(usage)
        self.budget.charge_model(usage.input_tokens + usage.output_tokens)
        self.emit(
            ModelCall(
                agent=self.agent,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                calls=len(response.calls),
                final=response.final is not None,
                stop_reason=response.stop_reason,
                prompt=content_text(request) if self.record_content else None,
                response=content_text(response) if self.record_content else None,
            )
        )
        return response


class _Completion:
    """The model gate's steps for `AttemptLoop`: one completion of one request."""

    def __init__(self, gate: ModelGate, request: ModelRequest) -> None:
        self.gate, self.request = gate, request
        #: Set when the last failed attempt failed because of the infrastructure.
        self.infrastructure: str | None = None

    def refusal(self, attempts_made: int) -> Failed | None:
        # Before every attempt: a retry may find the circuit opened by another call.
        if self.gate.breaker.allow().allowed:
            return None
        # Raised as a ModelCallError of its class (no exception caused it).
        return Failed(Failure(ErrorCode.CIRCUIT_OPEN, MODEL, "model circuit open"))

    async def attempt(self, number: int) -> Answered[ModelResponse] | Failed:
        self.gate.calls += 1
        try:
            response = await self.gate.backend.complete(self.request)
        except InjectedCrash as crash:  # the agent dies here: its crash path reports it
            self.gate.emit(crash.notice.event(process=False))
            raise
        except ModelCallError as exc:
            if isinstance(exc, InjectedModelError):
                self.gate.emit(exc.event(self.gate.agent))
                # A timeout takes its time before it fails (simulated, as a tool's does).
                await self.gate.clock.sleep(exc.fault.hangs_s)
            self.infrastructure = exc.infrastructure
            failure = Failure(
                exc.code, MODEL, str(exc), http_status=exc.status, retry_after_s=exc.retry_after_s
            )
            return Failed(failure, exc)
        return Answered(response)

    def report(self, failure: Failure, number: int, decision: RetryDecision) -> None:
        self.gate.emit(
            ModelError(
                agent=self.gate.agent,
                code=failure.code,
                status=failure.http_status,
                attempt=number,
                retry=decision.retry,
                delay_s=decision.delay_s,
            )
        )
