"""One invocation's events read in order: its model turns (steps), its tool calls, the
failures it met and the timeline of its decisions.

A step is one model turn; the tool calls after the k-th `model_call` event belong to
step k, model errors to the step they were trying to start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from errorflow.protocol.envelope import Envelope
from errorflow.protocol.events import (
    BreakerChange,
    EventFacts,
    GuardBlock,
    LoopStop,
    ModelCall,
    ModelError,
    RetriesExhausted,
    RetryScheduled,
    ToolCallEvent,
    parse_event,
)
from errorflow.scoring.genealogy_types import Decision, FailureView, ToolCallView


def _step_of(kind: str, tool: str | None, model_calls: int) -> int:
    """The step an event belongs to, given the model turns completed before it."""
    if kind == "model_error" or (kind == "breaker" and tool == "model"):
        return model_calls + 1  # the turn being attempted
    return max(model_calls, 1)


def _shown_for_call(ev: ToolCallEvent, implicit: bool) -> str:
    status = f" (HTTP {ev.http_status})" if ev.http_status else ""
    if ev.ok and ev.code is None:
        return "the tool's result (its value is not stored)"
    if ev.ok:
        if implicit:
            return f"the result as if complete: the {ev.code} was not said"
        return f"the result, marked {ev.code}"
    if implicit:
        return f"an empty result: the {ev.code}{status} was swallowed by the tool wrapper"
    return f"the error {ev.code}{status}: {ev.error or ''}".rstrip(": ")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _decision_text(parsed: object) -> str | None:
    """A timeline line for one event (None: not a decision the timeline shows)."""
    match parsed:
        case ModelCall(final=True, output_tokens=out):
            return f"model turn: final answer ({out} tokens out)"
        case ModelCall(calls=calls, output_tokens=out):
            return f"model turn: {plural(calls, 'tool call')} ({out} tokens out)"
        case ModelError(code=code, status=status, attempt=attempt, retry=retry, delay_s=d):
            http = f" (HTTP {status})" if status else ""
            then = f"retry in {d:g}s" if retry else "gives up"
            return f"model call attempt {attempt} failed: {code.value}{http}; {then}"
        case ToolCallEvent(ok=True, code=None, tool=tool, call_id=cid, attempts=n):
            return f"{tool} {cid}: ok after {plural(n, 'attempt')}"
        case ToolCallEvent(tool=tool, call_id=cid, attempts=n, code=code, http_status=http):
            shown = f" (HTTP {http})" if http else ""
            code_text = code.value if code is not None else "?"
            return f"{tool} {cid}: {code_text}{shown} after {plural(n, 'attempt')}"
        case RetryScheduled(tool=tool, attempt=attempt, code=code, delay_s=d):
            return f"{tool}: attempt {attempt} failed ({code.value}); retry after {d:g}s backoff"
        case RetriesExhausted(tool=tool, attempts=n, code=code, reason=reason):
            tried = plural(n, "attempt")
            return f"{tool}: retries exhausted after {tried} ({code.value}, {reason})"
        case BreakerChange(tool=tool, frm=frm, to=to, at=at, reason=reason):
            return f"{tool} breaker {frm} → {to} at t={at:g}s ({reason})"
        case GuardBlock(tool=tool, code=code, message=message):
            return f"guard blocked {tool}: {code.value} ({message})"
        case LoopStop(stopped=stopped, steps=steps, error=error):
            raised = f": {error}" if error else ""
            return f"loop stopped: {stopped} after {plural(steps, 'step')}{raised}"
    return None


@dataclass
class Walk:
    """One segment's events read in order: steps, tool calls, the timeline."""

    index: int
    agent: str
    implicit: bool
    model_calls: int = 0
    steps: int = 0
    stopped: str | None = None
    calls: list[ToolCallView] = field(default_factory=list)
    failures: list[FailureView] = field(default_factory=list)
    decisions: list[Decision] | None = field(default_factory=list)  # None: not kept

    def read(self, env: Envelope) -> None:
        facts = EventFacts.from_wire(env.payload)
        kind, tool = facts.type, facts.tool
        # Dispatch on the kind and the exact type: isinstance on a pydantic model class
        # goes through its metaclass, 20x slower (this runs on every event of a run).
        parsed = parse_event(env.payload)
        if type(parsed) is ModelCall:
            self.model_calls += 1
        step = _step_of(kind, tool, self.model_calls)
        if type(parsed) is LoopStop:
            step, self.stopped = parsed.steps, parsed.stopped
        self.steps = max(self.steps, step if kind != "model_error" else self.model_calls)
        if type(parsed) is ToolCallEvent:
            self.calls.append(self._call(parsed, step, env))
        failure = _failure(parsed, step, env, facts.at)
        if failure is not None:
            self.failures.append(failure)
        if self.decisions is None:
            return
        text = _decision_text(parsed)
        if text is None:
            return
        self.decisions.append(
            Decision(
                invocation=self.index,
                agent=self.agent,
                step=step,
                kind=kind,
                tool=tool,
                code=facts.code,
                text=text,
                at=facts.at,
                delay_s=facts.delay_s,
                seq=env.seq,
                ts=env.ts,
                facts=facts.fields,
            )
        )

    def _call(self, ev: ToolCallEvent, step: int, env: Envelope) -> ToolCallView:
        return ToolCallView(
            step=step,
            tool=ev.tool,
            call_id=ev.call_id,
            args=dict(ev.args),
            ok=ev.ok,
            code=ev.code.value if ev.code is not None else None,
            attempts=ev.attempts,
            http_status=ev.http_status,
            error=ev.error,
            shown=_shown_for_call(ev, self.implicit),
            seq=env.seq,
            ts=env.ts,
            silent=tuple(ev.silent),
        )


def _failure(parsed: object, step: int, env: Envelope, at: float | None) -> FailureView | None:
    if type(parsed) is ToolCallEvent and parsed.code is not None:
        return FailureView(
            "tool",
            step,
            parsed.tool,
            parsed.call_id,
            parsed.code.value,
            parsed.attempts,
            parsed.http_status,
            parsed.error,
            at,
            env.seq,
        )
    if type(parsed) is ModelError and not parsed.retry:
        code = parsed.code.value
        return FailureView(
            "model", step, "model", None, code, parsed.attempt, parsed.status, None, at, env.seq
        )
    return None
