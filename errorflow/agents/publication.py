"""Publishing a trial's result: what the result says about failures (propagation), the
agent's own faults on each copy, and where it goes (on, back for revision, or to the
discussion's peers).

A `TrialResult` is what a result needs; `publish` sends one copy to each recipient
(the costs on the first only: they were spent once) and keeps what a discussion
member remembers of its answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from errorflow.agents.discussion import Unsent
from errorflow.agents.kit import AgentKit
from errorflow.agents.own.python_loop import Stated
from errorflow.agents.policy_tally import PolicyTally
from errorflow.agents.propagation import InputReport, lowered, propagate
from errorflow.agents.routing import route
from errorflow.core.costs import Costs
from errorflow.faults.agent import Fired, apply_copy, mark_fired
from errorflow.policies.classify import Failure
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Kind
from errorflow.protocol.events import AgentFaultFired, Emit
from errorflow.protocol.result import ResultPayload
from errorflow.protocol.stop import StopReason

N = TypeVar("N", int, float)


@dataclass(frozen=True)
class TrialResult:
    """One round's result, before it goes out."""

    trial: int
    round: int
    trace_id: str
    final: FinalAnswer
    #: The failures it reports (the unrecovered ones).
    failures: list[Failure]
    stopped: StopReason | None
    #: What the inputs said about failures: the input messages themselves, or what a
    #: discussion round heard (errors heard in earlier rounds too, once each).
    reports: Sequence[InputReport]
    #: The ids of the messages it is derived from.
    derived: list[str]
    costs: Costs | None = None
    tally: PolicyTally | None = None
    ended_at: float | None = None
    sent_at: float | None = None
    #: What fired while the answer was made (model faults, an injected crash).
    fired: Sequence[Fired] = ()
    #: A python agent's own status and confidence (errorflow.agents.own).
    stated: Stated | None = None


async def publish(kit: AgentKit, result: TrialResult, emit: Emit | None = None) -> None:
    """Send `result` to its recipients; `emit`: where the agent fault events go (none
    for a crash or a passed-on infrastructure fault)."""
    verdict = propagate(
        kit.mode,
        agent=kit.name,
        final=result.final,
        failures=result.failures,
        stopped=result.stopped,
        inputs=result.reports,
    )
    if result.stated is not None and kit.mode == "explicit":
        verdict = lowered(verdict, result.stated.status, result.stated.confidence)
    final = result.final
    faults = kit.faults(result.trial, result.round)
    fired: list[Fired] = []
    if faults is not None:
        final, fired = faults.believe(final)
    peers = kit.talk.peers_after(result.round)
    where = route(kit.spec, final, result.round, kit.manager) if peers is None else None
    kind = where.kind if where is not None else Kind.RESULT
    targets = where.targets if where is not None else peers or []
    tally = result.tally
    payload = ResultPayload(
        role=kit.spec.role,
        round=where.round if where is not None else result.round + 1,
        answer=final,
        stopped=result.stopped,
        costs=result.costs,
        failures=[f.code for f in result.failures],
        policy=tally.to_wire() if tally is not None else {},
        tool_faults=dict(tally.tool_faults) if tally is not None else {},
        model_faults=dict(tally.model_faults_at) if tally is not None else {},
        ended_at=result.ended_at,
    )
    memory = kit.memory.get(result.trial)
    carried: Sequence[Fired] = ()  # what fired in a round that went to nobody: told once
    if memory is not None and memory.unsent is not None:  # an earlier round went to nobody
        payload = spent_with(payload, memory.unsent.payload)
        carried = memory.unsent.fired
        memory.unsent = None
    if not targets and memory is not None:  # spent all the same: the next round says so
        memory.unsent = Unsent(payload, [*carried, *result.fired, *fired])
    last_id: str | None = None
    for i, target in enumerate(targets):
        if i == 1:  # the costs were spent once, whatever the number of recipients
            payload = payload.without_costs()
        wire = payload.to_wire()
        copy_fired = list(fired)
        if faults is not None:
            copy = faults.copy_for(target, final)
            copy_fired += copy.fired
            wire = apply_copy(wire, copy)
        if emit is not None:
            for f in copy_fired:
                emit(AgentFaultFired(agent=kit.name, recipient=target, **f.event()))
        told = [*result.fired, *(carried if i == 0 else ()), *copy_fired]
        if told:  # with what fired while the answer was made
            mark_fired(wire, told)
        sent = await kit.endpoint.send(
            kind=kind,
            recipient=target,
            trial=result.trial,
            trace_id=result.trace_id,
            payload=wire,
            status=verdict.status,
            confidence=verdict.confidence,
            errors=verdict.errors,
            derived_from=result.derived,
            at=result.sent_at,
        )
        last_id = last_id or sent.id
    if memory is not None:
        memory.last_id = last_id
        memory.reported, memory.confidence = verdict.errors, verdict.confidence


def spent_with(payload: ResultPayload, earlier: ResultPayload) -> ResultPayload:
    """`payload` carrying what an `earlier` round spent, counted and met too (a
    discussion member's round whose answer went to no peer)."""

    def added(a: Mapping[str, N], b: Mapping[str, N]) -> dict[str, N]:
        return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}

    costs = payload.costs
    if earlier.costs is not None:
        costs = earlier.costs if costs is None else earlier.costs + costs
    return replace(
        payload,
        costs=costs,
        policy={k: round(v, 6) for k, v in added(earlier.policy, payload.policy).items()},
        tool_faults=added(earlier.tool_faults, payload.tool_faults),
        model_faults=added(earlier.model_faults, payload.model_faults),
    )
