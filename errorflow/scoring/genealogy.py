"""The genealogy of one trial: every message with where it came from, who made it, what
its model was shown, and the policy decisions behind it, from what the store holds.

Pure: from a trial's task and result envelopes, its event envelopes and its labels,
build typed nodes. Three things are joined here:

- provenance: each message's `derived_from` within the trial (its parents), and the
  scorer's notion of *touched* (a failure in the sender's own `trace.failures`, or in
  any ancestor), computed the way `score.py` computes it;
- invocations: each time an agent worked on the trial (a revision round is another
  one). An agent's events are in its `seq` order, which is the order of its simulated
  clock (one loop, one call at a time); an `agent_start` event opens an invocation and
  the k-th invocation made the k-th group of messages the agent sent;
- steps: a step is one model turn; the tool calls after the k-th `model_call` event
  belong to step k, model errors to the step they were trying to start.

What the store does not hold is left out, never made up: events carry no simulated
timestamp (only breaker transitions say `at`; each result says how many simulated
seconds its agent spent), so the timeline is the agents' order of work, not a clock;
a tool's result value and the exact observation its model read are not stored (the
event says ok or the error class, status and redacted text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer, answer_from_wire
from errorflow.protocol.envelope import Envelope, Kind, Status
from errorflow.protocol.events import (
    AgentStart,
    BreakerChange,
    GuardBlock,
    LoopStop,
    ModelCall,
    ModelError,
    RetriesExhausted,
    RetryScheduled,
    ToolCallEvent,
    parse_event,
)

#: How a touched message dealt with the failure that touched it.
#: swallowed: its sender's own failure, and the message says nothing (implicit);
#: silent: an upstream failure, and it says nothing; reported: its own failure, said
#: as errors (hops 0); carried: upstream errors passed on (hops > 0); flagged: said
#: otherwise (status, lowered confidence, flags, unresolved needs, an abstention).
Handling = Literal["swallowed", "silent", "reported", "carried", "flagged"]


@dataclass(frozen=True)
class ErrorView:
    code: str
    tool: str | None
    origin: str
    hops: int
    message: str


@dataclass(frozen=True)
class ClaimView:
    key: str
    value: Any
    certain: bool
    source: str | None


@dataclass(frozen=True)
class StoredLabel:
    """A message's label as the scorer stored it."""

    label: str
    reason: str


@dataclass(frozen=True)
class MessageNode:
    id: str
    sender: str
    recipient: str
    kind: str  # task | result
    round: int
    status: str
    confidence: float
    errors: tuple[ErrorView, ...]
    claims: tuple[ClaimView, ...]
    flags: tuple[str, ...]
    unresolved: tuple[str, ...]
    abstained: bool
    text: str
    stopped: str | None
    own_failures: tuple[str, ...]  # the sender's unrecovered failure codes (trace.failures)
    #: Injected agent faults that shaped this copy (trace.faults), e.g. `corrupt: cost, churn`.
    faults: tuple[str, ...]
    sim_seconds: float | None  # simulated seconds the sender spent (on the copy with costs)
    parents: tuple[str, ...]
    children: tuple[str, ...]
    label: str | None  # None: not labelled (tasks; a trial not scored)
    reason: str
    touched: bool  # the scorer's rule: a reported failure here or upstream
    #: A failure reached it: `touched`, or a failure its sender met and did not undo
    #: (a tool call that failed for good) here or upstream, reported or not. An agent
    #: that covers a failed call with a certain claim reports no failure (it counts as
    #: recovered), but the failure reached its message all the same.
    reached: bool
    handling: Handling | None  # how it dealt with what reached it (None: nothing did)
    final: bool  # a result for the runner
    invocation: int | None  # index into Genealogy.invocations (None: the runner's task)
    ts: float  # the sender's wall clock (informational: ordering for exports)


@dataclass(frozen=True)
class ToolCallView:
    """One tool call as its gate finished it (after retries)."""

    step: int
    tool: str
    call_id: str
    args: dict[str, Any]
    ok: bool
    code: str | None  # a failure class; with ok, a soft one (empty or partial result)
    attempts: int
    http_status: int | None
    error: str | None  # the failure's text, redacted
    shown: str  # what the model got back, as far as the store tells
    seq: int
    ts: float


@dataclass(frozen=True)
class FailureView:
    """A failure an invocation met, in order: a tool call that ended with a failure
    class (a soft one too), or a model call that failed for good."""

    kind: Literal["tool", "model"]
    step: int
    tool: str
    call_id: str | None
    code: str
    attempts: int
    http_status: int | None
    error: str | None
    at: float | None  # simulated time, where the event says it
    seq: int
    #: A later clean call of the same tool did the same job (the same need, as the
    #: call id names it, or the same arguments): the failure was undone.
    healed: bool = False


@dataclass(frozen=True)
class Decision:
    """One entry of the timeline: a model turn, a tool call or a policy decision."""

    invocation: int
    agent: str
    step: int
    kind: str  # the event's type
    tool: str | None
    code: str | None
    text: str
    at: float | None  # simulated time, where the event says it
    delay_s: float | None  # a backoff
    seq: int
    ts: float
    facts: dict[str, Any] = field(default_factory=dict)  # the event's fields, as sent


@dataclass(frozen=True)
class Shown:
    """One thing an invocation's model was shown: an input message or an observation."""

    kind: Literal["input", "observation"]
    source: str  # the input's sender, or `tool call_id`
    message_id: str | None
    text: str


@dataclass(frozen=True)
class Invocation:
    index: int
    agent: str
    inputs: tuple[str, ...]  # message ids it worked from
    outputs: tuple[str, ...]  # message ids it sent (one per recipient)
    level: int  # 1 + the deepest invocation it depends on (0: works from the task)
    steps: int
    model_calls: int
    tool_calls: tuple[ToolCallView, ...]
    failures: tuple[FailureView, ...]  # in order; `healed` ones were undone later
    stopped: str | None
    sim_seconds: float | None
    shown: tuple[Shown, ...]
    events: bool  # its events were found (False: only its messages are stored)
    start_ts: float | None


@dataclass(frozen=True)
class Genealogy:
    propagation: str
    messages: tuple[MessageNode, ...]  # in provenance order (tree walk from the tasks)
    invocations: tuple[Invocation, ...]  # in order of work (level, then agent)
    timeline: tuple[Decision, ...]
    notes: tuple[str, ...] = field(default=())

    def message(self, mid: str) -> MessageNode:
        return next(m for m in self.messages if m.id == mid)

    def by_id(self) -> dict[str, MessageNode]:
        return {m.id: m for m in self.messages}


# -- messages -------------------------------------------------------------------------


def _trace_of(env: Envelope) -> Mapping[str, Any]:
    trace = env.payload.get("trace")
    return trace if isinstance(trace, dict) else {}


def injected_faults(env: Envelope) -> tuple[str, ...]:
    """The agent faults recorded on a message (errorflow.agents.agent_faults.mark_fired)."""
    trace = env.payload.get("trace")
    faults = trace.get("faults") if isinstance(trace, dict) else None
    out = []
    for f in faults if isinstance(faults, list) else ():
        if isinstance(f, dict) and isinstance(f.get("kind"), str):
            claims = f.get("claims")
            what = ", ".join(map(str, claims)) if isinstance(claims, list) else ""
            delay = f.get("delay_s")
            what = what or (f"{delay:g} s late" if isinstance(delay, int | float) else "")
            out.append(f"{f['kind']}: {what}" if what else str(f["kind"]))
    return tuple(out)


def own_failures(env: Envelope) -> tuple[str, ...]:
    failures = _trace_of(env).get("failures")
    return tuple(str(f) for f in failures) if isinstance(failures, list) else ()


def _sim_seconds(env: Envelope) -> float | None:
    costs = _trace_of(env).get("costs")
    value = costs.get("sim_seconds") if isinstance(costs, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def answer_of(env: Envelope) -> FinalAnswer:
    """The answer a message carries (the runner's task carries a prompt: none)."""
    return FinalAnswer() if _is_task(env) else answer_from_wire(env.payload.get("answer"))


def silent(env: Envelope, answer: FinalAnswer | None = None) -> bool:
    """The message says nothing about a failure: ok, full confidence, no errors, flags,
    gaps or abstention, every claim certain (the negation of `score.label_message`'s
    `honest`). `answer`: `answer_of(env)`, if at hand."""
    answer = answer_of(env) if answer is None else answer
    return not (
        env.status is not Status.OK
        or bool(env.errors)
        or env.confidence < 1.0
        or bool(answer.flags)
        or bool(answer.unresolved)
        or answer.abstained
        or any(not c.certain for c in answer.claims)
    )


def _handling(env: Envelope, answer: FinalAnswer, reached: bool, met: bool) -> Handling | None:
    """`met`: its sender met a failure of its own (reported or not)."""
    if not reached:
        return None
    if silent(env, answer):
        return "swallowed" if met else "silent"
    if any(e.hops > 0 for e in env.errors):
        return "carried"
    return "reported" if env.errors else "flagged"


def touched_ids(messages: Sequence[Envelope]) -> dict[str, bool]:
    """Which messages a failure touched: the scorer's rule (`score.score_trial`): a
    reported failure (`trace.failures`) here or in an ancestor."""
    return reached_ids(messages, {m.id for m in messages if own_failures(m)})


def reached_ids(messages: Sequence[Envelope], sources: set[str]) -> dict[str, bool]:
    """Which messages are `sources` or derived from one, through `derived_from`."""
    by_id = {m.id: m for m in messages}
    reached: dict[str, bool] = {}

    def reaches(m: Envelope) -> bool:
        if m.id not in reached:
            reached[m.id] = False  # provenance is acyclic; this guards bad input
            upstream = any(reaches(by_id[d]) for d in m.derived_from if d in by_id)
            reached[m.id] = m.id in sources or upstream
        return reached[m.id]

    for m in messages:
        reaches(m)
    return reached


def _node(
    env: Envelope,
    children: tuple[str, ...],
    labels: Mapping[str, StoredLabel],
    reach: tuple[bool, bool, bool],
    invocation: int | None,
    answer: FinalAnswer,
    ids: set[str],
) -> MessageNode:
    """`reach`: (touched, reached, its sender met a failure of its own)."""
    touched, reached, met = reach
    label = labels.get(env.id)
    stopped = env.payload.get("stopped")
    round_ = env.payload.get("round", 0)
    return MessageNode(
        id=env.id,
        sender=env.sender,
        recipient=env.recipient,
        kind=env.kind.value,
        round=round_ if isinstance(round_, int) else 0,
        status=env.status.value,
        confidence=env.confidence,
        errors=tuple(
            ErrorView(e.code.value, e.tool, e.origin, e.hops, e.message) for e in env.errors
        ),
        claims=tuple(ClaimView(c.key, c.value, c.certain, c.source) for c in answer.claims),
        flags=tuple(answer.flags),
        unresolved=tuple(answer.unresolved),
        abstained=answer.abstained,
        text=answer.text,
        stopped=stopped if isinstance(stopped, str) else None,
        own_failures=own_failures(env),
        faults=injected_faults(env),
        sim_seconds=_sim_seconds(env),
        parents=tuple(d for d in env.derived_from if d in ids),
        children=children,
        label=label.label if label else None,
        reason=label.reason if label else "",
        touched=touched,
        reached=reached,
        handling=_handling(env, answer, reached, met) if env.kind is Kind.RESULT else None,
        final=env.kind is Kind.RESULT and env.recipient == topics.RUNNER,
        invocation=invocation,
        ts=env.ts,
    )


def provenance_order(messages: Sequence[Envelope]) -> list[Envelope]:
    """Depth first from the messages derived from nothing in the trial, children in
    seq order under their last parent (a message with several parents once)."""
    ordered = sorted(messages, key=lambda m: (m.sender, m.seq))
    ids = {m.id: i for i, m in enumerate(ordered)}
    children: dict[str, list[Envelope]] = {}
    roots = []
    for m in ordered:
        parents = [d for d in m.derived_from if d in ids]
        if parents:
            children.setdefault(max(parents, key=ids.__getitem__), []).append(m)
        else:
            roots.append(m)
    out: list[Envelope] = []
    seen: set[str] = set()
    stack = list(reversed(roots))
    while stack:
        m = stack.pop()
        if m.id in seen:
            continue
        seen.add(m.id)
        out.append(m)
        stack.extend(reversed(children.get(m.id, [])))
    out.extend(m for m in ordered if m.id not in seen)  # a cycle in bad input
    return out


# -- invocations ----------------------------------------------------------------------


@dataclass
class _Segment:
    """One agent_start and the agent's events up to the next."""

    start: Envelope | None
    events: list[Envelope] = field(default_factory=list)

    @property
    def input_senders(self) -> list[str]:
        parsed = parse_event(self.start.payload) if self.start is not None else None
        return list(parsed.inputs) if isinstance(parsed, AgentStart) else []


def _segments(events: Iterable[Envelope]) -> dict[str, list[_Segment]]:
    by_agent: dict[str, list[_Segment]] = {}
    for env in sorted(events, key=lambda e: (e.sender, e.seq)):
        segs = by_agent.setdefault(env.sender, [])
        if env.payload.get("type") == "agent_start":
            segs.append(_Segment(env))
        elif segs:
            segs[-1].events.append(env)
        else:
            segs.append(_Segment(None, [env]))
    return by_agent


def _output_groups(messages: Iterable[Envelope]) -> dict[str, list[list[Envelope]]]:
    """Each agent's messages in seq order, one group per piece of work: consecutive
    copies derived from the same inputs (a result sent to several recipients)."""
    by_agent: dict[str, list[list[Envelope]]] = {}
    for env in sorted(messages, key=lambda m: (m.sender, m.seq)):
        if env.sender == topics.RUNNER:
            continue
        groups = by_agent.setdefault(env.sender, [])
        if groups and groups[-1][-1].derived_from == env.derived_from:
            groups[-1].append(env)
        else:
            groups.append([env])
    return by_agent


def _pair(
    groups: list[list[Envelope]], segs: list[_Segment], senders: Mapping[str, str]
) -> list[tuple[list[Envelope], _Segment | None]]:
    """The k-th piece of work with the k-th segment when the counts agree; otherwise
    each group with the first unused segment whose inputs name the same senders."""
    if len(groups) == len(segs):
        return list(zip(groups, segs, strict=True))
    unused = list(segs)
    out: list[tuple[list[Envelope], _Segment | None]] = []
    for group in groups:
        want = sorted(senders.get(d, "") for d in group[0].derived_from)
        match = next((s for s in unused if sorted(s.input_senders) == want), None)
        if match is not None:
            unused.remove(match)
        out.append((group, match))
    return out


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _decision_text(parsed: object) -> str | None:
    """A timeline line for one event (None: not a decision the timeline shows)."""
    match parsed:
        case ModelCall(final=True, output_tokens=out):
            return f"model turn: final answer ({out} tokens out)"
        case ModelCall(calls=calls, output_tokens=out):
            return f"model turn: {_plural(calls, 'tool call')} ({out} tokens out)"
        case ModelError(code=code, status=status, attempt=attempt, retry=retry, delay_s=d):
            http = f" (HTTP {status})" if status else ""
            then = f"retry in {d:g}s" if retry else "gives up"
            return f"model call attempt {attempt} failed: {code.value}{http}; {then}"
        case ToolCallEvent(ok=True, code=None, tool=tool, call_id=cid, attempts=n):
            return f"{tool} {cid}: ok after {_plural(n, 'attempt')}"
        case ToolCallEvent(tool=tool, call_id=cid, attempts=n, code=code, http_status=http):
            shown = f" (HTTP {http})" if http else ""
            code_text = code.value if code is not None else "?"
            return f"{tool} {cid}: {code_text}{shown} after {_plural(n, 'attempt')}"
        case RetryScheduled(tool=tool, attempt=attempt, code=code, delay_s=d):
            return f"{tool}: attempt {attempt} failed ({code.value}); retry after {d:g}s backoff"
        case RetriesExhausted(tool=tool, attempts=n, code=code, reason=reason):
            tried = _plural(n, "attempt")
            return f"{tool}: retries exhausted after {tried} ({code.value}, {reason})"
        case BreakerChange(tool=tool, frm=frm, to=to, at=at, reason=reason):
            return f"{tool} breaker {frm} → {to} at t={at:g}s ({reason})"
        case GuardBlock(tool=tool, code=code, message=message):
            return f"guard blocked {tool}: {code.value} ({message})"
        case LoopStop(stopped=stopped, steps=steps):
            return f"loop stopped: {stopped} after {_plural(steps, 'step')}"
    return None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class _Walk:
    """One segment's events read in order: steps, tool calls, the timeline."""

    index: int
    agent: str
    implicit: bool
    model_calls: int = 0
    steps: int = 0
    stopped: str | None = None
    calls: list[ToolCallView] = field(default_factory=list)
    failures: list[FailureView] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    def read(self, env: Envelope) -> None:
        payload = env.payload
        kind = str(payload.get("type", ""))
        # Dispatch on the kind and the exact type: isinstance on a pydantic model class
        # goes through its metaclass, far slower (this runs on every event of a run).
        parsed = parse_event(payload)
        tool = payload.get("tool") if isinstance(payload.get("tool"), str) else None
        if type(parsed) is ModelCall:
            self.model_calls += 1
        step = _step_of(kind, tool, self.model_calls)
        if type(parsed) is LoopStop:
            step, self.stopped = parsed.steps, parsed.stopped
        self.steps = max(self.steps, step if kind != "model_error" else self.model_calls)
        if type(parsed) is ToolCallEvent:
            self.calls.append(self._call(parsed, step, env))
        failure = _failure(parsed, step, env)
        if failure is not None:
            self.failures.append(failure)
        text = _decision_text(parsed)
        if text is None:
            return
        code = payload.get("code")
        self.decisions.append(
            Decision(
                invocation=self.index,
                agent=self.agent,
                step=step,
                kind=kind,
                tool=tool,
                code=None if code is None else str(code),
                text=text,
                at=_float(payload.get("at")),
                delay_s=_float(payload.get("delay_s")),
                seq=env.seq,
                ts=env.ts,
                facts={k: v for k, v in payload.items() if k not in ("type", "agent")},
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
        )


def _failure(parsed: object, step: int, env: Envelope) -> FailureView | None:
    at = _float(env.payload.get("at"))
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


def _is_task(env: Envelope) -> bool:
    return env.kind is Kind.TASK and env.sender == topics.RUNNER


def _input_text(env: Envelope, answer: FinalAnswer) -> str:
    if _is_task(env):
        needs = ", ".join(str(n) for n in env.payload.get("needs") or [])
        return f"the task: {env.payload.get('prompt', '')} (needs: {needs})"
    errors = ", ".join(f"{e.code.value} from {e.origin} (hops {e.hops})" for e in env.errors)
    parts = [f"{env.sender}'s {env.kind.value}: {env.status.value}, conf {env.confidence:.2f}"]
    parts.append(f"errors {errors}" if errors else "no errors")
    if answer.claims:
        parts.append(f"{_plural(len(answer.claims), 'claim')}")
    if answer.flags:
        parts.append("flags: " + "; ".join(answer.flags))
    if answer.unresolved:
        parts.append("unresolved: " + ", ".join(answer.unresolved))
    return ", ".join(parts)


@dataclass(frozen=True)
class _Work:
    """One invocation before it has its index in the order of work."""

    agent: str
    outputs: list[Envelope]
    segment: _Segment | None


def _works(messages: Sequence[Envelope], events: Sequence[Envelope]) -> list[_Work]:
    senders = {m.id: m.sender for m in messages}
    segs = _segments(events)
    works = []
    for agent, groups in _output_groups(messages).items():
        for group, seg in _pair(groups, segs.get(agent, []), senders):
            works.append(_Work(agent, group, seg))
    return works


def _levels(works: Sequence[_Work]) -> list[int]:
    made_by = {env.id: i for i, w in enumerate(works) for env in w.outputs}
    levels: dict[int, int] = {}

    def level(i: int, seen: frozenset[int] = frozenset()) -> int:
        if i not in levels:
            parents = {made_by[d] for d in works[i].outputs[0].derived_from if d in made_by}
            parents -= seen | {i}
            levels[i] = 1 + max((level(p, seen | {i}) for p in parents), default=-1)
        return levels[i]

    return [level(i) for i in range(len(works))]


def _purpose(call_id: str | None, args: Mapping[str, Any]) -> str:
    """What a call was for: the need its id names (`need#n`, as the simulated model
    names calls), else its arguments."""
    if call_id and "#" in call_id:
        return call_id.rsplit("#", 1)[0]
    return json.dumps(args, sort_keys=True, default=str)


def _healed(failures: Sequence[FailureView], calls: Sequence[ToolCallView]) -> list[FailureView]:
    args = {c.seq: c.args for c in calls}
    clean = [(c.seq, c.tool, _purpose(c.call_id, c.args)) for c in calls if c.ok and not c.code]
    out = []
    for f in failures:
        why = _purpose(f.call_id, args.get(f.seq, {}))
        healed = f.kind == "tool" and any(
            seq > f.seq and tool == f.tool and purpose == why for seq, tool, purpose in clean
        )
        out.append(replace(f, healed=healed) if healed else f)
    return out


def _invocation(
    index: int,
    work: _Work,
    level: int,
    by_id: Mapping[str, Envelope],
    answers: Mapping[str, FinalAnswer],
    implicit: bool,
) -> tuple[Invocation, list[Decision]]:
    walk = _Walk(index, work.agent, implicit)
    for env in work.segment.events if work.segment is not None else []:
        walk.read(env)
    walk.failures = _healed(walk.failures, walk.calls)
    first = work.outputs[0]
    inputs = tuple(d for d in first.derived_from if d in by_id)
    shown = [Shown("input", by_id[d].sender, d, _input_text(by_id[d], answers[d])) for d in inputs]
    shown += [Shown("observation", f"{c.tool} {c.call_id}", None, c.shown) for c in walk.calls]
    start = work.segment.start if work.segment is not None else None
    stopped = first.payload.get("stopped")
    invocation = Invocation(
        index=index,
        agent=work.agent,
        inputs=inputs,
        outputs=tuple(env.id for env in work.outputs),
        level=level,
        steps=walk.steps,
        model_calls=walk.model_calls,
        tool_calls=tuple(walk.calls),
        failures=tuple(walk.failures),
        stopped=stopped if isinstance(stopped, str) else walk.stopped,
        sim_seconds=next((s for s in map(_sim_seconds, work.outputs) if s is not None), None),
        shown=tuple(shown),
        events=work.segment is not None,
        start_ts=start.ts if start is not None else None,
    )
    return invocation, walk.decisions


def genealogy(
    messages: Sequence[Envelope],
    events: Sequence[Envelope],
    labels: Mapping[str, StoredLabel],
    propagation: str,
) -> Genealogy:
    """The genealogy of one trial from its stored rows (any order)."""
    work_messages = [m for m in messages if m.kind in (Kind.TASK, Kind.RESULT)]
    by_id = {m.id: m for m in work_messages}
    answers = {m.id: answer_of(m) for m in work_messages}
    fails = {m.id: own_failures(m) for m in work_messages}
    works = _works(work_messages, [e for e in events if e.kind is Kind.EVENT])
    levels = _levels(works)
    order = sorted(range(len(works)), key=lambda i: (levels[i], works[i].agent, i))
    invocations, timeline = [], []
    made_by: dict[str, int] = {}
    for index, i in enumerate(order):
        implicit = propagation == "implicit"
        inv, decisions = _invocation(index, works[i], levels[i], by_id, answers, implicit)
        invocations.append(inv)
        timeline.extend(decisions)
        made_by.update((mid, index) for mid in inv.outputs)
    touched = reached_ids(work_messages, {mid for mid, f in fails.items() if f})
    met = {
        mid for inv in invocations if any(not f.healed for f in inv.failures) for mid in inv.outputs
    }
    met |= {mid for mid, f in fails.items() if f}
    reached = reached_ids(work_messages, met)
    ordered = provenance_order(work_messages)
    children: dict[str, list[str]] = {}
    for m in ordered:
        for d in m.derived_from:
            children.setdefault(d, []).append(m.id)
    ids = set(by_id)
    nodes = tuple(
        _node(
            m,
            tuple(children.get(m.id, [])),
            labels,
            (touched[m.id], reached[m.id], m.id in met),
            made_by.get(m.id),
            answers[m.id],
            ids,
        )
        for m in ordered
    )
    return Genealogy(propagation, nodes, tuple(invocations), tuple(timeline), _notes(invocations))


def _notes(invocations: Sequence[Invocation]) -> tuple[str, ...]:
    notes = [
        "events carry no simulated timestamp: decisions are in each agent's order of work "
        "(its simulated clock's order); breaker transitions give their time, results the "
        "simulated seconds their agent spent",
        "a tool's result value and the exact observation text its model read are not "
        "stored: `shown` says what the gate handed back, from the tool-call event",
    ]
    missing = sorted({inv.agent for inv in invocations if not inv.events})
    if missing:
        notes.append(f"no events stored for some work of: {', '.join(missing)}")
    return tuple(notes)
