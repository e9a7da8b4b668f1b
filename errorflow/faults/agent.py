"""Faults injected into an agent (`agents.NAME.faults`), not into its tools.

The shapes follow the multi-agent resilience literature:
- `corrupt` (AutoInject, Huang et al. 2025): a fraction `p` of the agent's outgoing
  messages is rewritten in transit and, within each, a fraction `claims` of its claims
  gets a plausible but wrong value. The agent itself still believes the right values.
- `faulty` (AutoTransform): the agent's model errs: each claim it states is wrong with
  probability `p`, in every message it sends (it believes the wrong value).
- `drop`: a message is silently lost (the agent thinks it sent it).
- `hang`: the agent never replies; the recipient waits its `wait_s` and goes on
  without the message.
- `crash` (errorflow.faults.crash): the agent dies at a model call.
- `slow`: the reply takes `delay_s` more simulated seconds; past the recipient's
  `wait_s` it is too late and counts as no reply.

One instance per (trial, agent round), drawing from the agent's own fault stream, so a
fault's draws never move any other stream: an agent without faults draws nothing. Per
answer, `believe` applies `faulty` (the model states wrong values). Per outgoing copy
(one per recipient), every configured message fault draws once, in the order written,
whether or not it fires, so the same seed fires the same faults whatever the timing.

Wrong values are plausible: a number moves by 5-50 %, a text or list takes another value
of the same type from the world (`pool`), so a reader cannot tell them by their shape.

`AgentFaultTally` counts, per `agent.kind`, the trials each fault fired in and those it
never did, from what the messages of a trial say under `trace.faults` (`mark_fired`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, JsonValue

from errorflow.core.shapes import Ident, Probability, Strict
from errorflow.faults.crash import CrashFault
from errorflow.faults.tally import FaultCount, Tally
from errorflow.protocol.claims import Claim, FinalAnswer, answer_to_wire
from errorflow.protocol.envelope import Envelope, JsonObject, Kind
from errorflow.protocol.result import ResultPayload


class _AgentFault(Strict):
    #: Probability per message (corrupt, drop, hang, slow) or per claim (faulty).
    p: Probability
    #: Only messages to these recipients (`runner` for final results); default: all.
    to: list[Ident] | None = Field(default=None, max_length=64)


class CorruptFault(_AgentFault):
    kind: Literal["corrupt"]
    #: Within a corrupted message, the probability that each claim is rewritten.
    claims: Probability = 0.6


class FaultyFault(_AgentFault):
    kind: Literal["faulty"]


class DropFault(_AgentFault):
    kind: Literal["drop"]


class HangFault(_AgentFault):
    kind: Literal["hang"]


class SlowFault(_AgentFault):
    kind: Literal["slow"]
    delay_s: float = Field(default=30.0, gt=0, le=86_400)


AgentFault = Annotated[
    CorruptFault | FaultyFault | DropFault | HangFault | SlowFault | CrashFault,
    Field(discriminator="kind"),
]

#: Kinds that decide the fate of one outgoing message (a copy per recipient).
MESSAGE_FATES = ("drop", "hang", "slow")


@dataclass(frozen=True)
class Fired:
    """One fault that fired: on what (`recipient`, the claims it rewrote)."""

    kind: str
    recipient: str | None = None
    claims: tuple[str, ...] = ()
    delay_s: float = 0.0

    def event(self) -> dict[str, Any]:
        """The fields of its `agent_fault` event (errorflow.protocol.events)."""
        return {"kind": self.kind, "claims": list(self.claims), "delay_s": self.delay_s}

    def to_wire(self) -> dict[str, JsonValue]:
        wire: dict[str, JsonValue] = {"kind": self.kind}
        if self.recipient is not None:
            wire["to"] = self.recipient
        if self.claims:
            wire["claims"] = list(self.claims)
        if self.delay_s:
            wire["delay_s"] = self.delay_s
        return wire


@dataclass
class Copy:
    """What one recipient gets: the answer as sent, and whether it arrives."""

    answer: FinalAnswer
    #: "drop" or "hang": no message reaches the recipient (it waits, then goes on).
    withheld: str | None = None
    delay_s: float = 0.0
    fired: list[Fired] = field(default_factory=list)


class AgentFaults:
    def __init__(
        self, faults: Sequence[AgentFault], rng: random.Random, pool: Sequence[JsonValue]
    ) -> None:
        self.faults = list(faults)
        self.rng = rng
        self.pool = list(pool)

    def believe(self, final: FinalAnswer) -> tuple[FinalAnswer, list[Fired]]:
        """`faulty`: each claim the agent states is wrong with probability p."""
        fired: list[Fired] = []
        for fault in self.faults:
            if isinstance(fault, FaultyFault):
                final, keys = self._rewrite(final, fault.p)
                if keys:
                    fired.append(Fired("faulty", claims=tuple(keys)))
        return final, fired

    def copy_for(self, recipient: str, final: FinalAnswer) -> Copy:
        copy = Copy(final)
        for fault in self.faults:
            if isinstance(fault, FaultyFault | CrashFault):  # per answer; per model call
                continue
            hit = self.rng.random() < fault.p
            if not hit or (fault.to is not None and recipient not in fault.to):
                continue
            if isinstance(fault, CorruptFault):
                copy.answer, keys = self._rewrite(copy.answer, fault.claims)
                if keys:  # a message without claims has nothing to corrupt
                    copy.fired.append(Fired("corrupt", recipient, tuple(keys)))
            elif isinstance(fault, DropFault | HangFault) and copy.withheld is None:
                copy.withheld = fault.kind
                copy.fired.append(Fired(fault.kind, recipient))
            elif isinstance(fault, SlowFault):
                copy.delay_s += fault.delay_s
                copy.fired.append(Fired("slow", recipient, delay_s=fault.delay_s))
        return copy

    def _rewrite(self, final: FinalAnswer, p: float) -> tuple[FinalAnswer, list[str]]:
        claims: list[Claim] = []
        keys: list[str] = []
        for claim in final.claims:
            if self.rng.random() < p and claim.value not in (None, [], {}):
                claims.append(replace(claim, value=wrong_value(claim.value, self.rng, self.pool)))
                keys.append(claim.key)
            else:
                claims.append(claim)
        return (replace(final, claims=claims) if keys else final), keys


def wrong_value(value: JsonValue, rng: random.Random, pool: Sequence[JsonValue]) -> JsonValue:
    """A plausible value that is not `value` (same type; from the world when it can)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        factor = 1 + rng.choice((-1, 1)) * rng.uniform(0.05, 0.5)
        moved = value * factor
        return round(moved) if isinstance(value, int) and round(moved) != value else moved
    if isinstance(value, str):
        others = [v for v in pool if isinstance(v, str) and v != value]
        return rng.choice(others) if others else f"{value} (revised)"
    if isinstance(value, list):
        return _wrong_list(value, rng, pool)
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        return {**value, key: wrong_value(value[key], rng, pool)}
    return value


def _wrong_list(value: list[JsonValue], rng: random.Random, pool: Sequence[JsonValue]) -> JsonValue:
    """One element swapped for another of the world's (or removed when there is none)."""
    items = [x for v in pool if isinstance(v, list) for x in v]
    others = [x for x in dict.fromkeys(map(str, items)) if x not in map(str, value)]
    out = list(value)
    i = rng.randrange(len(out))
    if others:
        out[i] = rng.choice(others)
    elif len(out) > 1:
        del out[i]
    else:
        out[i] = f"{out[i]}-revised"
    return out


def apply_copy(wire: JsonObject, copy: Copy) -> JsonObject:
    """A result payload as this copy's faults leave it: rewritten claims, a marker in
    place of a withheld message (errorflow.agents.late_inputs), a delay."""
    out = dict(wire)
    if copy.withheld is not None:
        out["answer"] = answer_to_wire(FinalAnswer(abstained=True, text="(no message)"))
        out["withheld"] = copy.withheld
    elif copy.answer is not None:
        out["answer"] = answer_to_wire(copy.answer)
    if copy.delay_s:
        out["delay_s"] = round(copy.delay_s, 6)
    return out


def mark_fired(wire: JsonObject, fired: Sequence[Fired]) -> None:
    """Record on the message (under `trace`, never read by a model) the faults that
    shaped it, for the reports' fired counts. A corrupted message is not `touched` for
    the scorer: its sender cannot know, and a downstream answer that got the facts
    right anyway is clean; its false claims are what make it contaminated."""
    trace = wire.get("trace")
    if isinstance(trace, dict):
        trace["faults"] = [f.to_wire() for f in fired]


def model_faults_fired(counts: Mapping[str, int]) -> list[Fired]:
    """Injected model faults that fired on the way to an answer, one entry per kind
    (`model.overloaded`), recorded with the answer like the agent's own faults."""
    return [Fired(f"model.{kind}") for kind in sorted(counts) if counts[kind]]


# -- tally ----------------------------------------------------------------------------


class _Agent(Protocol):
    @property
    def faults(self) -> Sequence[AgentFault]: ...


class AgentFaultTally:
    """Where each configured agent fault fired, by `agent.kind` (a crash of an
    `errorflow agent` process as the runner heard it; model faults by their place:
    errorflow.faults.model_tally)."""

    def __init__(self, agents: Mapping[str, _Agent]) -> None:
        kinds = [f"{name}.{f.kind}" for name, agent in agents.items() for f in agent.faults]
        self.tally = Tally(list(dict.fromkeys(kinds)))

    @property
    def kinds(self) -> list[str]:
        return self.tally.keys

    def finish(
        self,
        trial: int,
        messages: Sequence[Envelope],
        known: bool = True,
        crashed: str | None = None,
    ) -> None:
        """A trial is over; `known`: its results arrived (else its counts are lost);
        `crashed`: the agent whose process an injected crash killed in it (no result
        says so)."""
        if not self.kinds:
            return
        if not known:
            self.tally.add_unknown()
            return
        seen: Counter[str] = Counter()
        if crashed is not None:
            seen[f"{crashed}.crash"] += 1
        for m in messages:
            if m.kind is not Kind.RESULT:
                continue
            for f in ResultPayload.from_wire(m.payload).faults:
                if f"{m.sender}.{f.kind}" in self.kinds:
                    seen[f"{m.sender}.{f.kind}"] += 1
        self.tally.add(trial, seen)

    def counts(self) -> dict[str, FaultCount] | None:
        return self.tally.counts()
