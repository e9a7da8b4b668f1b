"""The genealogy of one trial: every message with where it came from, who made it, what
its model was shown, and the policy decisions behind it, from what the store holds.

Pure: from a trial's task and result envelopes, its event envelopes and its labels,
build typed nodes (errorflow.scoring.genealogy_types). Three things are joined here:

- provenance: each message's `derived_from` within the trial (its parents), and the
  scorer's notion of *touched* (errorflow.scoring.labels), the rule the scorer labels by;
- invocations (errorflow.scoring.invocations): each time an agent worked on the trial;
- steps (errorflow.scoring.event_walk): a step is one model turn.

What the store does not hold is left out, never made up: events carry no simulated
timestamp (only breaker transitions say `at`; each result says how many simulated
seconds its agent spent), so the timeline is the agents' order of work, not a clock;
a tool's result value and the exact observation its model read are not stored (the
event says ok or the error class, status and redacted text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.events import AgentCrashed, event_type, parse_event
from errorflow.protocol.result import Readings, read_all
from errorflow.scoring.genealogy_types import Genealogy, Invocation, StoredLabel
from errorflow.scoring.invocations import invocation_of, levels_of, works_of
from errorflow.scoring.labels import is_task, reached_ids, touched_ids
from errorflow.scoring.message_nodes import message_node, provenance_order


def genealogy(
    messages: Sequence[Envelope],
    events: Sequence[Envelope],
    labels: Mapping[str, StoredLabel],
    propagation: str,
    *,
    whole: bool = True,
    readings: Readings | None = None,
) -> Genealogy:
    """The genealogy of one trial from its stored rows (any order). Not `whole`: what a
    root cause reads, without the timeline and what each invocation was shown (built
    for every failed trial as it ends, so it costs a part of every run). `readings`:
    the scorer's, when it read the same envelopes."""
    work_messages = [m for m in messages if m.kind in (Kind.TASK, Kind.RESULT)]
    by_id = {m.id: m for m in work_messages}
    payloads = read_all(work_messages, readings)
    answers = {m.id: FinalAnswer() if is_task(m) else payloads[m.id].answer for m in work_messages}
    reporting = {mid for mid, p in payloads.items() if p.failures}
    works = works_of(work_messages, [e for e in events if e.kind is Kind.EVENT])
    levels = levels_of(works)
    order = sorted(range(len(works)), key=lambda i: (levels[i], works[i].agent, i))
    invocations, timeline = [], []
    made_by: dict[str, int] = {}
    for index, i in enumerate(order):
        implicit = propagation == "implicit"
        inv, decisions = invocation_of(
            index, works[i], levels[i], by_id, answers, payloads, implicit, whole=whole
        )
        invocations.append(inv)
        timeline.extend(decisions)
        made_by.update((mid, index) for mid in inv.outputs)
    touched = touched_ids(work_messages)
    met = {
        mid for inv in invocations if any(not f.healed for f in inv.failures) for mid in inv.outputs
    }
    met |= reporting
    reached = reached_ids(work_messages, met)
    ordered = provenance_order(work_messages)
    children: dict[str, list[str]] = {}
    for m in ordered:
        for d in m.derived_from:
            children.setdefault(d, []).append(m.id)
    ids = set(by_id)
    nodes = tuple(
        message_node(
            m,
            payloads[m.id],
            answers[m.id],
            tuple(children.get(m.id, [])),
            labels,
            (touched[m.id], reached[m.id], m.id in met),
            made_by.get(m.id),
            ids,
        )
        for m in ordered
    )
    notes = _notes(invocations)
    return Genealogy(
        propagation, nodes, tuple(invocations), tuple(timeline), notes, _crashes(events)
    )


def _crashes(events: Sequence[Envelope]) -> tuple[tuple[str, str], ...]:
    out = []
    for e in events:
        if e.kind is Kind.EVENT and event_type(e.payload) == "agent_crashed":
            crash = parse_event(e.payload)
            if isinstance(crash, AgentCrashed) and crash.process and crash.agent == e.sender:
                out.append((e.sender, f"injected crash ({crash.fault}) at model call {crash.call}"))
    return tuple(out)


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
