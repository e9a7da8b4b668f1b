"""The genealogy's invocations: each time an agent worked on a trial (a revision round
is another one), paired with the events it published and the messages it sent.

An agent's events are in its `seq` order, which is the order of its simulated clock
(one loop, one call at a time); an `agent_start` event opens an invocation and the k-th
invocation made the k-th group of messages the agent sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.events import AgentStart, event_type, parse_event
from errorflow.protocol.result import ResultPayload
from errorflow.protocol.task import TaskPayload
from errorflow.scoring.event_walk import Walk, plural
from errorflow.scoring.genealogy_types import (
    Decision,
    FailureView,
    Invocation,
    Shown,
    ToolCallView,
)
from errorflow.scoring.labels import is_task
from errorflow.scoring.message_nodes import sim_seconds


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
        if event_type(env.payload) == "agent_start":
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


def _input_text(env: Envelope, answer: FinalAnswer) -> str:
    if is_task(env):
        task = TaskPayload.from_wire(env.payload)
        return f"the task: {task.prompt} (needs: {', '.join(task.needs)})"
    errors = ", ".join(f"{e.code.value} from {e.origin} (hops {e.hops})" for e in env.errors)
    parts = [f"{env.sender}'s {env.kind.value}: {env.status.value}, conf {env.confidence:.2f}"]
    parts.append(f"errors {errors}" if errors else "no errors")
    if answer.claims:
        parts.append(f"{plural(len(answer.claims), 'claim')}")
    if answer.flags:
        parts.append("flags: " + "; ".join(answer.flags))
    if answer.unresolved:
        parts.append("unresolved: " + ", ".join(answer.unresolved))
    return ", ".join(parts)


@dataclass(frozen=True)
class Work:
    """One invocation before it has its index in the order of work."""

    agent: str
    outputs: list[Envelope]
    segment: _Segment | None


def works_of(messages: Sequence[Envelope], events: Sequence[Envelope]) -> list[Work]:
    senders = {m.id: m.sender for m in messages}
    segs = _segments(events)
    works = []
    for agent, groups in _output_groups(messages).items():
        for group, seg in _pair(groups, segs.get(agent, []), senders):
            works.append(Work(agent, group, seg))
    return works


def levels_of(works: Sequence[Work]) -> list[int]:
    made_by = {env.id: i for i, w in enumerate(works) for env in w.outputs}
    levels: dict[int, int] = {}
    return [_level(i, frozenset(), works, made_by, levels) for i in range(len(works))]


def _level(
    i: int,
    seen: frozenset[int],
    works: Sequence[Work],
    made_by: Mapping[str, int],
    levels: dict[int, int],
) -> int:
    # A module function, not a closure calling itself (a reference cycle: see
    # labels._reaches).
    if i not in levels:
        parents = {made_by[d] for d in works[i].outputs[0].derived_from if d in made_by}
        parents -= seen | {i}
        levels[i] = 1 + max(
            (_level(p, seen | {i}, works, made_by, levels) for p in parents), default=-1
        )
    return levels[i]


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


def _shown(
    inputs: Sequence[str],
    by_id: Mapping[str, Envelope],
    answers: Mapping[str, FinalAnswer],
    calls: Sequence[ToolCallView],
) -> list[Shown]:
    """What an invocation's model was shown: its inputs, then its tools' answers."""
    shown = [Shown("input", by_id[d].sender, d, _input_text(by_id[d], answers[d])) for d in inputs]
    return shown + [Shown("observation", f"{c.tool} {c.call_id}", None, c.shown) for c in calls]


def invocation_of(
    index: int,
    work: Work,
    level: int,
    by_id: Mapping[str, Envelope],
    answers: Mapping[str, FinalAnswer],
    payloads: Mapping[str, ResultPayload],
    implicit: bool,
    *,
    whole: bool = True,
) -> tuple[Invocation, list[Decision]]:
    """The `index`-th invocation in the order of work, and its timeline entries (not
    `whole`: neither those nor what it was shown)."""
    walk = Walk(index, work.agent, implicit, decisions=[] if whole else None)
    for env in work.segment.events if work.segment is not None else []:
        walk.read(env)
    walk.failures = _healed(walk.failures, walk.calls)
    first = work.outputs[0]
    inputs = tuple(d for d in first.derived_from if d in by_id)
    shown = _shown(inputs, by_id, answers, walk.calls) if whole else []
    start = work.segment.start if work.segment is not None else None
    stopped = payloads[first.id].stopped
    spent = (sim_seconds(payloads[env.id]) for env in work.outputs)
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
        stopped=stopped.wire if stopped is not None else walk.stopped,
        sim_seconds=next((s for s in spent if s is not None), None),
        shown=tuple(shown),
        events=work.segment is not None,
        start_ts=start.ts if start is not None else None,
    )
    return invocation, walk.decisions or []
