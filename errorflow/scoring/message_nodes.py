"""The genealogy's message nodes: each task and result of a trial with its place in
the provenance, what it says and how it dealt with a failure that reached it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.result import ResultPayload
from errorflow.scoring.genealogy_types import (
    ClaimView,
    ErrorView,
    Handling,
    MessageNode,
    StoredLabel,
)
from errorflow.scoring.labels import silent


def injected_faults(payload: ResultPayload) -> tuple[str, ...]:
    """The agent faults recorded on a message (`trace.faults`), as the reports show them."""
    return tuple(f.text for f in payload.faults)


def own_failures(payload: ResultPayload) -> tuple[str, ...]:
    return tuple(code.value for code in payload.failures)


def sim_seconds(payload: ResultPayload) -> float | None:
    """Simulated seconds the sender spent (only the copy that carries the costs says)."""
    return payload.costs.sim_seconds if payload.costs is not None else None


def handling(env: Envelope, answer: FinalAnswer, reached: bool, met: bool) -> Handling | None:
    """`met`: its sender met a failure of its own (reported or not)."""
    if not reached:
        return None
    if silent(env, answer):
        return "swallowed" if met else "silent"
    if any(e.hops > 0 for e in env.errors):
        return "carried"
    return "reported" if env.errors else "flagged"


def message_node(
    env: Envelope,
    payload: ResultPayload,
    answer: FinalAnswer,
    children: tuple[str, ...],
    labels: Mapping[str, StoredLabel],
    reach: tuple[bool, bool, bool],
    invocation: int | None,
    ids: set[str],
) -> MessageNode:
    """`reach`: (touched, reached, its sender met a failure of its own)."""
    touched, reached, met = reach
    label = labels.get(env.id)
    return MessageNode(
        id=env.id,
        sender=env.sender,
        recipient=env.recipient,
        kind=env.kind.value,
        round=payload.round,
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
        stopped=payload.stopped.wire if payload.stopped is not None else None,
        own_failures=own_failures(payload),
        faults=injected_faults(payload),
        sim_seconds=sim_seconds(payload),
        parents=tuple(d for d in env.derived_from if d in ids),
        children=children,
        label=label.label if label else None,
        reason=label.reason if label else "",
        touched=touched,
        reached=reached,
        handling=handling(env, answer, reached, met) if env.kind is Kind.RESULT else None,
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
