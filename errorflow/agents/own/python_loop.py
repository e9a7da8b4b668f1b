"""A python agent's loop: the user's callable in the place of the model's loop.

`OwnLoop.run` has `TrialLoop.run`'s contract (errorflow.agents.loop): it takes the task
and what arrived and returns a `LoopOutcome`, so the conclusion, propagation and
publication that follow are a built-in agent's. Each tool call is one step: the budget
opens it, the tool gate runs it (faults, retries, breakers, limiters), the loop guard
closes it; once the loop is stopped (budget, guard, an unrecoverable failure when the
policy stops on one, a tool server gone), further calls are refused without running.

The budget is checked before every model call the callable makes, too. The callable
runs within `function_timeout_s` of its own time (errorflow/agents/own/own_time_limit.py).
A callable that raises is the agent's failure, classified like a tool's exception
(`internal_error` when nothing more is known); one that returns something that is not
an answer is `internal_error` too. A model call that failed for good and was not
handled stops the agent as it stops a built-in one; an injected crash goes on up to
the agent's crash path.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pydantic import JsonValue

from errorflow.agents.loop import LoopOutcome, ModelCaller, Persona, ToolCaller
from errorflow.agents.own.context import (
    AgentContext,
    AgentReply,
    ModelHandle,
    ModelReply,
    Need,
    ToolRequest,
    ToolResult,
    Upstream,
)
from errorflow.agents.own.own_time_limit import OwnTimeLimit
from errorflow.core.redact import redact
from errorflow.core.taxonomy import UNRECOVERABLE, ErrorCode
from errorflow.faults.crash import InjectedCrash
from errorflow.models.backend import (
    AssistantTurn,
    ModelCallError,
    ModelRequest,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    UpstreamTurn,
)
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure, classify_exception
from errorflow.policies.loop_guard import LoopGuard
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.events import Emit, LoopStop
from errorflow.protocol.stop import StopReason
from errorflow.scenario.python_agent_ref import AgentCallable

#: Longest text of a callable's exception kept on the failure.
MAX_RAISED_CHARS = 300
#: Distinct failures of users' code said on stderr, at most (each once a process).
MAX_SAID = 32

log = logging.getLogger(__name__)
_said: set[tuple[str, str]] = set()


def _say_once(agent: str, error: str) -> None:
    """A python agent's code failed: its failure is scored (the class travels, the text
    is in the `loop_stop` event), and said once here, so a bug in the user's code (a
    forgotten `return`) is not read as a failure the system contained."""
    key = (agent, error)
    if key in _said or len(_said) >= MAX_SAID:
        return
    _said.add(key)
    log.warning(
        "agent %s: its code failed: %s (said once; `errorflow trace` shows each trial)",
        agent,
        error,
    )


@dataclass(frozen=True)
class Stated:
    """What the callable said of its own result (it can only lower errorflow's verdict)."""

    status: str | None = None
    confidence: float | None = None


@dataclass
class OwnLoop:
    fn: AgentCallable
    trial: int
    persona: Persona
    model: ModelCaller
    gate: ToolCaller
    budget: Budget
    guard: LoopGuard
    stop_on_unrecoverable: bool
    emit: Emit
    #: The callable's own time (errorflow/agents/own/own_time_limit.py).
    limit: OwnTimeLimit
    stated: Stated = field(default_factory=Stated)
    _successes: int = 0
    _calls: int = 0

    async def run(self, task: TaskTurn, upstream: list[UpstreamTurn]) -> LoopOutcome:
        out = LoopOutcome(task, [task, *upstream])
        p = self.persona
        ctx = AgentContext(
            agent=p.agent,
            role=p.role,
            trial=self.trial,
            task=task.prompt,
            needs=tuple(Need.of(n) for n in task.needs),
            upstream=tuple(Upstream.of(t) for t in upstream),
            tools=tuple(t.name for t in p.tools),
            tool_defs=tuple(p.tools),
            model=ModelHandle(lambda note: self._ask(out, note)),
            _call=lambda name, args, call_id: self._call(out, name, args, call_id),
        )
        own_error: str | None = None
        try:
            async with self.limit.running():
                returned = await self.fn(ctx)
            reply = _reply(returned)
        except (InjectedCrash, asyncio.CancelledError):
            raise
        except ModelCallError as exc:
            tool = "budget" if exc.code is ErrorCode.BUDGET_EXHAUSTED else "model"
            self._stop(out, Failure(exc.code, tool, redact(str(exc)), http_status=exc.status))
            if tool == "model":
                out.stopped = StopReason(ErrorCode.MODEL_ERROR)
        except Exception as exc:  # the user's code failed: the agent's failure, classified
            failure = classify_exception(p.agent, exc)
            own_error = redact(failure.raw)[:MAX_RAISED_CHARS]
            self._stop(out, replace(failure, raw=own_error))
            _say_once(p.agent, own_error)
        else:
            out.final = reply.answer()
            self.stated = Stated(reply.status, reply.confidence)
        if out.stopped is not None:
            self.emit(
                LoopStop(
                    agent=p.agent,
                    code=out.stopped.code_value,
                    stopped=out.stopped.wire,
                    steps=self.budget.steps,
                    error=own_error,
                )
            )
        return out

    @staticmethod
    def _stop(out: LoopOutcome, failure: Failure) -> None:
        out.failures.append(failure)
        if out.stopped is None:
            out.stopped = StopReason(failure.code)

    async def _call(
        self,
        out: LoopOutcome,
        name: str,
        args: Mapping[str, JsonValue] | str,
        call_id: str | None,
    ) -> ToolResult:
        """One tool call as one step of the loop (`call_id`: the model's, when it asked)."""
        if out.stopped is not None:
            return ToolResult(name, False, None, out.stopped.code_value, "the agent was stopped")
        self.budget.start_step()
        reason = self.budget.exhausted()
        if reason is not None:
            self._stop(out, Failure(ErrorCode.BUDGET_EXHAUSTED, "budget", reason))
            return ToolResult(name, False, None, ErrorCode.BUDGET_EXHAUSTED.value, reason)
        arguments = args if isinstance(args, str) else dict(args)
        call = ToolCall(call_id or self._call_id(out, name, arguments), name, arguments)
        self._calls += 1
        with self.limit.paused():
            outcome = await self.gate.call(call)
        out.turns += [AssistantTurn([call]), ObservationTurn(call.id, name, outcome.observation)]
        failure = outcome.failure
        if failure is None:
            self._successes += 1
            out.succeeded_tools.add(name)
        else:
            out.failures.append(failure)
            if failure.code is ErrorCode.INFRA_FAULT:
                out.stopped = StopReason(ErrorCode.INFRA_FAULT)
            elif failure.code in UNRECOVERABLE and self.stop_on_unrecoverable:
                out.stopped = StopReason(failure.code, unrecoverable=True)
        if out.stopped is None:
            progress = float(self._successes - (failure is not None))
            verdict = self.guard.end_step(progress)
            if verdict is not None:
                out.stopped = StopReason(verdict.code)
        return ToolResult.of(name, outcome.observation)

    def _call_id(self, out: LoopOutcome, name: str, args: Mapping[str, JsonValue] | str) -> str:
        """A call's id: `need#n` for a call of a need's tool with the need's arguments
        (as the model's calls are named, so the trace says which need it served and
        which retries redid it), else `agent-py-n`."""
        for view in out.task.needs:
            if view.tool == name and Need.of(view).arguments == args:
                n = sum(1 for t in out.turns if isinstance(t, ObservationTurn)) + 1
                return f"{view.id}#{n}"
        return f"{self.persona.agent}-py-{self._calls}"

    async def _ask(self, out: LoopOutcome, note: str | None) -> ModelReply:
        # The budget bounds a python agent's model calls too (its steps are tool calls).
        reason = self.budget.exhausted()
        if reason is not None:
            raise ModelCallError(ErrorCode.BUDGET_EXHAUSTED, f"budget exhausted: {reason}")
        p = self.persona
        turns = list(out.turns)
        if note:
            turns[0] = TaskTurn(f"{out.task.prompt}\n{note}", out.task.needs)
        request = ModelRequest(
            p.agent, p.role, p.system, turns, p.tools, p.behaviour.name, p.stance
        )
        with self.limit.paused():
            response = await self.model.complete(request)
        calls = tuple(ToolRequest(c.id, c.name, c.arguments) for c in response.calls)
        final = response.final
        if final is None and not calls:  # as the model's own loop reads it
            final = FinalAnswer(text="(no answer)", flags=["empty model response"])
        return ModelReply(calls, AgentReply.of(final) if final is not None else None)


def _reply(returned: object) -> AgentReply:
    """The callable's answer: an `AgentReply`, or a mapping of claims."""
    if isinstance(returned, Mapping):
        returned = AgentReply(claims=dict(returned))
    if not isinstance(returned, AgentReply):
        raise TypeError(f"returned a {type(returned).__name__}; expected an AgentReply")
    if not all(isinstance(k, str) for k in returned.claims):
        raise TypeError("claim keys must be strings (need ids)")
    json.dumps(dict(returned.claims))  # a claim's value travels as JSON
    c = returned.confidence
    if c is not None and not (isinstance(c, int | float) and 0.0 <= c <= 1.0):
        raise ValueError(f"confidence must be between 0 and 1, got {c!r}")
    if returned.status not in (None, "ok", "partial_failure", "failed"):
        raise ValueError(f"status must be ok, partial_failure or failed, got {returned.status!r}")
    return returned
