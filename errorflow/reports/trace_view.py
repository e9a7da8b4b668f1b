"""`errorflow trace`: one trial as text that reads at 80 columns.

Four parts: the root cause (origin, who dropped it, where contamination started and
stopped, the error's hops), the provenance tree from the runner's task to each final
message (status, confidence, errors, label and why, what each model was shown), the
timeline of model turns and policy decisions, and what the store cannot tell. Plain
strings: the command line escapes what the store holds before it reaches a terminal.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator, Sequence

from errorflow.scoring.genealogy_types import Genealogy, Invocation, MessageNode
from errorflow.scoring.root_cause import Origin, RootCause
from errorflow.scoring.trial_trace import TrialTrace

MARKS = {"contaminated": "✗", "contained": "◐", "clean": "✓"}
HANDLING = {
    "swallowed": "swallowed: its own failure, and the message says ok",
    "silent": "silent: passes an upstream failure on without a word",
    "reported": "reported: its own failure, as errors",
    "carried": "carried: upstream errors passed on, one hop further",
    "flagged": "flagged: said so (status, confidence, flags or gaps)",
}


def _wrap(text: str, width: int, first: str, rest: str | None = None) -> list[str]:
    rest = first if rest is None else rest
    return textwrap.wrap(
        text,
        width=max(20, width),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _value(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def header_lines(t: TrialTrace, width: int) -> list[str]:
    head = f"trial {t.trial} of {t.run_id} ({t.scenario}, {t.propagation} propagation)"
    lines = _wrap(head, width, "", "  ")
    if t.outcome is None:
        lines.append("not scored (the run stopped before this trial ended)")
    else:
        depth = f" · depth {t.depth}" if t.outcome == "contaminated" else ""
        lines.append(f"outcome {t.outcome}{depth}")
        if t.reason:
            lines += _wrap(t.reason, width, "  ")
    needs = f" (needs: {', '.join(t.needs)})" if t.needs else ""
    lines += _wrap(f"task: {t.task}{needs}", width, "", "  ")
    return lines


def _origin_lines(o: Origin, width: int) -> list[str]:
    if o.kind == "answer":
        return _wrap(f"no failure: {o.detail}", width, "  origin  ", " " * 10)
    if o.kind == "agent_fault":
        return _wrap(f"agent fault: {o.detail}", width, "  origin  ", " " * 10)
    if o.kind == "silent_fault":  # the call succeeded: no class, no error text
        return _wrap(f"silent wrong answer: {o.detail}", width, "  origin  ", " " * 10)
    where = " · ".join(
        p for p in (o.agent, o.tool, f"step {o.step}" if o.step else "", o.call_id) if p
    )
    lines = _wrap(where, width, "  origin  ", " " * 10)
    http = f" (HTTP {o.http_status})" if o.http_status else ""
    tries = f" after {o.attempts} attempt{'s' if o.attempts != 1 else ''}" if o.attempts else ""
    at = f" at t={o.at:g}s" if o.at is not None else ""
    lines += _wrap(f"{o.code}{http}{tries}{at}", width, " " * 10)
    if o.error:
        lines += _wrap(f"error: {o.error}", width, " " * 10, " " * 12)
    said = HANDLING.get(o.said, o.said)
    lines += _wrap(f"at {o.agent}: {said}", width, " " * 10, " " * 12)
    return lines


def _hops(g: Genealogy, o: Origin) -> str | None:
    """The origin's error as it travelled: each message that carries it, and its hops."""
    steps = [
        f"{m.sender} → {m.recipient} hops {e.hops}"
        for m in g.messages
        for e in m.errors
        if e.origin == o.agent and e.code == o.code
    ]
    return ", ".join(steps) if steps else None


def root_cause_lines(g: Genealogy, rc: RootCause, width: int) -> list[str]:
    lines = ["Root cause"]
    for o in rc.origins:
        lines += _origin_lines(o, width)
        carried = _hops(g, o)
        if carried:
            lines += _wrap(f"error carried: {carried}", width, " " * 10, " " * 12)
    for o in rc.secondary:
        lines += _wrap(f"also failed, downstream: {o.detail}", width, "  ", "    ")
    dropped = ", ".join(dict.fromkeys(f"{d.agent} ({d.how})" for d in rc.dropped)) or "nobody"
    lines += _wrap(f"dropped by: {dropped}", width, "  ", "    ")
    if rc.starts:
        edges = ", ".join(f"{a} → {b}" for a, b in rc.edges)
        text = f"contamination starts at {', '.join(rc.starts)}; carried {edges}"
        if rc.stopped:
            text += f"; stopped by {', '.join(rc.stopped)}"
        lines += _wrap(text, width, "  ", "    ")
    if rc.contained_at:
        lines += _wrap(f"contained first at: {', '.join(rc.contained_at)}", width, "  ", "    ")
    return lines


def _message_head(m: MessageNode, origins: set[str]) -> str:
    mark = " ◆" if m.id in origins else ""
    turn = f" (round {m.round})" if m.round else ""
    parts = [f"{m.sender} → {m.recipient}  {m.kind}{turn}{mark}"]
    if m.kind == "result" or m.own_failures or m.errors:
        parts.append(f"{m.status} · conf {m.confidence:.2f}")
    if m.label:
        parts.append(f"{MARKS.get(m.label, '?')} {m.label}")
    if m.final:
        parts.append("final")
    return "  ".join(parts[:1]) + ("  " + " · ".join(parts[1:]) if parts[1:] else "")


def _message_body(m: MessageNode, inv: Invocation | None, others: Sequence[str]) -> Iterator[str]:
    if m.reason:
        yield f"why: {m.reason}"
    if others:
        yield f"also derived from: {', '.join(others)}"
    for e in m.errors:
        yield (
            f"error: {e.code} from {e.origin}"
            + (f" ({e.tool})" if e.tool else "")
            + (f", hops {e.hops}")
        )
    if m.own_failures:
        yield f"own failures: {', '.join(m.own_failures)}"
    for fault in m.faults:
        yield f"injected agent fault: {fault}"
    if m.handling:
        yield HANDLING[m.handling]
    if m.claims:
        yield "claims: " + "; ".join(
            f"{c.key} = {_value(c.value)}" + ("" if c.certain else " (uncertain)") for c in m.claims
        )
    if m.flags:
        yield "flags: " + "; ".join(m.flags)
    if m.unresolved:
        yield "unresolved: " + ", ".join(m.unresolved)
    if m.abstained:
        yield "abstained"
    if m.stopped:
        yield f"loop stopped: {m.stopped}"
    if inv is not None and m.id == inv.outputs[0]:
        spent = f", {inv.sim_seconds:g}s simulated" if inv.sim_seconds is not None else ""
        yield f"work: {inv.steps} step(s), {inv.model_calls} model turn(s){spent}"
        for s in inv.shown:
            yield f"shown ({s.source}): {s.text}"


def tree_lines(g: Genealogy, origins: set[str], width: int) -> list[str]:
    """The provenance tree: each message under its last parent (others named)."""
    order = {m.id: i for i, m in enumerate(g.messages)}
    by_id = g.by_id()
    placed: dict[str | None, list[MessageNode]] = {}
    for m in g.messages:
        parents = [p for p in m.parents if p in order]
        placed.setdefault(max(parents, key=order.__getitem__) if parents else None, []).append(m)
    lines = _wrap("Provenance (✗ contaminated, ◐ contained, ✓ clean, ◆ origin)", width, "")

    def walk(m: MessageNode, lead: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.extend(_wrap(_message_head(m, origins), width, lead + branch, lead + "   "))
        inner = lead + ("" if top else ("   " if last else "│  "))
        kids = placed.get(m.id, [])
        body = inner + ("│ " if kids else "  ")
        inv = g.invocations[m.invocation] if m.invocation is not None else None
        place = max(m.parents, key=order.__getitem__) if m.parents else None
        others = [by_id[p].sender for p in m.parents if p != place and p in by_id]
        for text in _message_body(m, inv, others):
            lines.extend(_wrap(text, width, body, body + "  "))
        for i, kid in enumerate(kids):
            walk(kid, inner, i == len(kids) - 1, False)

    for root in placed.get(None, []):
        walk(root, "", True, True)
    return lines


def timeline_lines(g: Genealogy, width: int) -> list[str]:
    head = "Timeline (each agent's model turns and policy decisions, in order of work)"
    lines = _wrap(head, width, "", "  ")
    agent_w = min(14, max((len(d.agent) for d in g.timeline), default=6))
    for d in g.timeline:
        lead = f"  {d.agent:<{agent_w}} {d.step:>2}  "
        lines += _wrap(d.text, width, lead, " " * len(lead))
    if not g.timeline:
        lines.append("  (no events stored for this trial)")
    return lines


def trace_lines(t: TrialTrace, width: int = 80) -> list[str]:
    """The whole trace, fitted to `width` columns."""
    g = t.genealogy
    lines = header_lines(t, width)
    origins: set[str] = set()
    if t.root_cause is not None:
        origins = {o.message_id for o in t.root_cause.origins}
        lines += ["", *root_cause_lines(g, t.root_cause, width)]
    lines += ["", *tree_lines(g, origins, width), "", *timeline_lines(g, width)]
    lines += ["", "Not stored", *(ln for n in g.notes for ln in _wrap(n, width, "  - ", "    "))]
    return lines
