"""The root cause of a failed trial: where the failure started, who dropped it, how far
contamination went and where it stopped (pure, from a trial's genealogy).

- an *origin* is a failure an agent met and did not undo, with nothing upstream to
  cause it: an invocation with a tool call that failed for good (a later clean call for
  the same need undoes one; a fault retried away leaves none), a model call that failed
  for good, or a failure its result reports, while no failure reached any of its
  inputs. Its position is that failure's event: the tool (or the model), the step, the
  call id, the class, the HTTP status and the redacted error text (kind `tool`, `model`,
  or `policy` when the policy refused the call: a breaker open, a guard). The failure its
  result reports first is preferred; an agent that covered a failed call with a certain
  claim reports none, and the first failure it did not undo is taken. The same agent
  failing because an upstream failure reached it (a wrong argument taken from a missing
  answer) is a *secondary* failure, not an origin; faults that never fired, or were
  undone, are no origins;
- a contaminated message no failure reached (a model stating a false claim on its own)
  is an origin of kind `answer`, or `agent_fault` when an injected agent fault shaped it
  (a message corrupted in transit, a faulty model), or `silent_fault` when a tool its
  sender called answered ok with a wrong value (a stale, wrong_entity or corrupt fault
  fired on the call: its position is that call, the fault named by its place); a failed
  trial with neither (an
  answer left incomplete) has its first message that is not clean as the `answer`
  origin;
- *dropped*: messages a failure reached that say nothing (`swallowed`: the sender's own
  failure; `silent`: an upstream one) or state a false claim as certain
  (`contaminated`);
- contamination *starts* at a contaminated message with no contaminated parent, is
  *stopped* by a result that is not contaminated though a parent was, and is *contained*
  first where a message a failure reached said so with no parent contained or
  contaminated; the *edges* that carry it are the contaminated messages, sender →
  recipient.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from errorflow.scoring.genealogy_types import (
    FailureView,
    Genealogy,
    Invocation,
    MessageNode,
)

FAILED_OUTCOMES = frozenset({"contained", "contaminated"})

OriginKind = Literal["tool", "model", "policy", "answer", "agent_fault", "silent_fault"]
DropKind = Literal["swallowed", "silent", "contaminated"]


@dataclass(frozen=True)
class Origin:
    agent: str
    kind: OriginKind
    tool: str | None
    code: str | None
    step: int | None  # the model turn (1-based) within the agent's invocation
    call_id: str | None
    attempts: int | None
    http_status: int | None
    error: str | None  # redacted
    at: float | None  # simulated time, where the store has it
    invocation: int
    round: int  # the revision round of the agent's work
    message_id: str  # the message through which it left the agent
    said: str  # how that message handled it (genealogy.Handling), or its label
    detail: str  # one line: what happened

    @property
    def position(self) -> tuple[str, str | None, str | None]:
        """(agent, tool, call id): where a fault fired."""
        return (self.agent, self.tool, self.call_id)


@dataclass(frozen=True)
class Dropped:
    agent: str
    how: DropKind
    message_id: str


@dataclass(frozen=True)
class RootCause:
    outcome: str
    depth: int
    origins: tuple[Origin, ...]
    secondary: tuple[Origin, ...]
    dropped: tuple[Dropped, ...]
    starts: tuple[str, ...]  # agents where contamination starts
    stopped: tuple[str, ...]  # agents that stopped it
    contained_at: tuple[str, ...]  # agents that first said so
    edges: tuple[tuple[str, str], ...]  # sender → recipient of contaminated messages

    @property
    def primary(self) -> Origin | None:
        return self.origins[0] if self.origins else None

    def to_wire(self) -> dict[str, Any]:
        # By hand: dataclasses.asdict deep-copies every value (slower, and this runs
        # for every failed trial of a run).
        return {
            "outcome": self.outcome,
            "depth": self.depth,
            "origins": [dict(vars(o)) for o in self.origins],
            "secondary": [dict(vars(o)) for o in self.secondary],
            "dropped": [dict(vars(d)) for d in self.dropped],
            "starts": list(self.starts),
            "stopped": list(self.stopped),
            "contained_at": list(self.contained_at),
            "edges": [list(e) for e in self.edges],
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> RootCause:
        return cls(
            outcome=str(data["outcome"]),
            depth=int(data["depth"]),
            origins=tuple(Origin(**o) for o in data["origins"]),
            secondary=tuple(Origin(**o) for o in data["secondary"]),
            dropped=tuple(Dropped(**d) for d in data["dropped"]),
            starts=tuple(data["starts"]),
            stopped=tuple(data["stopped"]),
            contained_at=tuple(data["contained_at"]),
            edges=tuple((str(a), str(b)) for a, b in data["edges"]),
        )


def root_cause(g: Genealogy, outcome: str, depth: int) -> RootCause | None:
    """The root cause of a failed trial (None for a success, a bus or infra fault)."""
    if outcome not in FAILED_OUTCOMES:
        return None
    nodes = g.by_id()
    origins, secondary = _fault_origins(g, nodes)
    origins += _crash_origins(g)
    origins += _answer_origins(g, nodes, fallback=not origins)
    results = [m for m in g.messages if m.kind == "result" and m.label is not None]

    def bad(mid: str) -> bool:
        return mid in nodes and nodes[mid].label == "contaminated"

    def said(mid: str) -> bool:
        return mid in nodes and nodes[mid].label in ("contained", "contaminated")

    return RootCause(
        outcome=outcome,
        depth=depth,
        origins=tuple(origins),
        secondary=tuple(secondary),
        dropped=tuple(_dropped(results)),
        starts=_unique(m.sender for m in results if bad(m.id) and not any(map(bad, m.parents))),
        stopped=_unique(m.sender for m in results if not bad(m.id) and any(map(bad, m.parents))),
        contained_at=_unique(
            m.sender
            for m in results
            if m.label == "contained" and m.reached and not any(map(said, m.parents))
        ),
        edges=tuple(dict.fromkeys((m.sender, m.recipient) for m in results if bad(m.id))),
    )


def _unique(names: Sequence[str] | Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def _dropped(results: Sequence[MessageNode]) -> list[Dropped]:
    out = []
    for m in results:
        if m.handling in ("swallowed", "silent"):
            how: DropKind = "swallowed" if m.handling == "swallowed" else "silent"
            out.append(Dropped(m.sender, how, m.id))
        elif m.reached and m.label == "contaminated":
            out.append(Dropped(m.sender, "contaminated", m.id))
    return out


#: Codes the policy layer gives a call it refused or stopped (the call did not fail by
#: itself: an origin of kind `policy`).
POLICY_CODES = frozenset({
    "repeated_call_blocked", "circuit_open", "retries_exhausted", "budget_exhausted",
    "step_limit", "no_progress", "consecutive_failures",
})  # fmt: skip


def _fault_origins(
    g: Genealogy, nodes: Mapping[str, MessageNode]
) -> tuple[list[Origin], list[Origin]]:
    origins: list[Origin] = []
    secondary: list[Origin] = []
    for inv in g.invocations:
        first = nodes.get(inv.outputs[0]) if inv.outputs else None
        if first is None or "infra_fault" in first.own_failures:
            continue
        live = [f for f in inv.failures if not f.healed]
        if not live and not first.own_failures:
            continue
        origin = _origin_of(inv, first, live)
        if origin.kind == "policy" and origin.tool is None:  # no call ended with it
            origin = _injected_origin(inv, first, nodes) or origin
        if origin.agent != inv.agent:  # an input's sender: upstream of what it sent
            upstream = nodes[origin.message_id].reached
        else:
            upstream = any(nodes[d].reached for d in inv.inputs if d in nodes)
        (secondary if upstream else origins).append(origin)
    return origins, secondary


def _injected_origin(
    inv: Invocation, message: MessageNode, nodes: Mapping[str, MessageNode]
) -> Origin | None:
    """A failure no call of `inv` ended with, that an injected agent fault made: an
    input that never came (dropped, hung, or slower than the wait) is its sender's
    fault; a crash is the agent's own."""
    code = message.own_failures[0] if message.own_failures else None
    late = {e.tool for e in message.errors if e.hops == 0 and e.code == "timeout"}
    for d in inv.inputs if code == "timeout" else ():
        node = nodes.get(d)
        withheld = node is not None and any(_kind(f) in LATE_FAULTS for f in node.faults)
        if node is not None and node.sender in late and withheld:
            said = message.handling or "unreached"
            detail = (
                f"{node.sender}'s {node.kind} to {node.recipient} never came in time "
                f"(injected {'; '.join(node.faults)}); {inv.agent} went on without it, {said}"
            )
            return _injected(node, code, detail)
    own = [f for f in message.faults if _kind(f) == "crash"]
    if own and code == "internal_error":
        return _injected(message, code, f"{code} at {inv.agent} (injected {'; '.join(own)})")
    return None


#: Agent faults that keep a message from its recipient in time.
LATE_FAULTS = frozenset({"drop", "hang", "slow"})


def _kind(fault: str) -> str:
    """An injected fault's kind, from its text (`slow: 100 s late` → `slow`)."""
    return fault.partition(":")[0]


def _crash_origins(g: Genealogy) -> list[Origin]:
    """An agent process an injected crash killed mid-work: it sent nothing, so its own
    `agent_fault` origin, with no message it left through."""
    return [
        Origin(agent, "agent_fault", None, "internal_error", None, None, None, None, None,
               None, -1, 0, "", "crashed", f"internal_error at {agent} ({what}): its process died")
        for agent, what in g.crashes
    ]  # fmt: skip


def _injected(message: MessageNode, code: str | None, detail: str) -> Origin:
    """An `agent_fault` origin at the sender of `message`, through which it left."""
    invocation = message.invocation if message.invocation is not None else -1
    said = message.handling or message.label or ""
    return Origin(message.sender, "agent_fault", None, code, None, None, None, None, None,
                  None, invocation, message.round, message.id, said, detail)  # fmt: skip


def _origin_of(inv: Invocation, message: MessageNode, live: Sequence[FailureView]) -> Origin:
    """The position of the first failure `inv` did not undo: the one its result reports
    first when it reports any, else the first (an agent that covered a failed call
    with a certain claim reports none)."""
    found = _first_failure(inv, message, live)
    said = message.handling or "unreached"
    if found is None:  # a policy stop (a budget, a guard) that no tool call ended with
        code = message.own_failures[0]
        detail = f"{code} at {inv.agent} (step {inv.steps}), {said}"
        return Origin(inv.agent, "policy", None, code, inv.steps, None, None, None, None, None,
                      inv.index, message.round, message.id, said, detail)  # fmt: skip
    http = f" (HTTP {found.http_status})" if found.http_status else ""
    where = f"{found.tool} {found.call_id}" if found.call_id else found.tool
    detail = f"{where} at {inv.agent}, step {found.step}: {found.code}{http}, {said}"
    kind: OriginKind = "policy" if found.code in POLICY_CODES else found.kind
    return Origin(
        agent=inv.agent,
        kind=kind,
        tool=found.tool,
        code=found.code,
        step=found.step,
        call_id=found.call_id,
        attempts=found.attempts,
        http_status=found.http_status,
        error=found.error,
        at=found.at,
        invocation=inv.index,
        round=message.round,
        message_id=message.id,
        said=said,
        detail=detail,
    )


def _first_failure(
    inv: Invocation, message: MessageNode, live: Sequence[FailureView]
) -> FailureView | None:
    """Of the failures not undone, the one the result's first reported code stands for
    (of that class; of a (tool, class) the result names as its own error, when it
    does), else the first of them."""
    if not message.own_failures:
        return live[0] if live else None
    code = message.own_failures[0]
    own = {(e.tool, e.code) for e in message.errors if e.hops == 0 and e.origin == inv.agent}
    candidates = [f for f in live if f.code == code]
    if own:
        candidates = [f for f in candidates if (f.tool, f.code) in own] or candidates
    if candidates:
        return candidates[0]
    return next((f for f in inv.failures if f.code == code), None)


def _answer_origins(
    g: Genealogy, nodes: Mapping[str, MessageNode], *, fallback: bool
) -> list[Origin]:
    """Contamination no failure touched: the first contaminated message of each chain
    that is untouched; with `fallback`, else the first message that is not clean."""
    results = [m for m in g.messages if m.kind == "result" and m.label is not None]

    def bad(m: MessageNode) -> bool:
        return m.label == "contaminated"

    picked = [
        m
        for m in results
        if bad(m) and not m.reached and not any(bad(nodes[p]) for p in m.parents if p in nodes)
    ]
    if not picked and fallback:
        rest = [m for m in results if m.label != "clean"] or [m for m in results if m.final]
        picked = rest[:1]
    return [_silent_origin(m, g) or _answer_origin(m) for m in picked]


def _silent_origin(m: MessageNode, g: Genealogy) -> Origin | None:
    """A contaminated message whose sender's tool answered ok with a wrong value: the
    first such call of its invocation is where the false claim started."""
    if m.label != "contaminated" or m.invocation is None:
        return None
    if not 0 <= m.invocation < len(g.invocations):
        return None
    inv = g.invocations[m.invocation]
    call = next((c for c in inv.tool_calls if c.ok and c.silent), None)
    if call is None:
        return None
    faults = ", ".join(call.silent)
    detail = (
        f"{call.tool} {call.call_id} at {inv.agent}, step {call.step}: answered ok with a "
        f"wrong value ({faults} fired); {m.sender}'s {m.kind} to {m.recipient}: {m.reason}"
    )
    return Origin(
        agent=inv.agent,
        kind="silent_fault",
        tool=call.tool,
        code=None,
        step=call.step,
        call_id=call.call_id,
        attempts=call.attempts,
        http_status=None,
        error=None,
        at=None,
        invocation=inv.index,
        round=m.round,
        message_id=m.id,
        said=m.label or "",
        detail=detail,
    )


def _answer_origin(m: MessageNode) -> Origin:
    why = m.reason or ("incomplete answer" if m.label == "clean" else m.label or "")
    detail = f"{m.sender}'s {m.kind} to {m.recipient}: {why}"
    # An injected agent fault (a corrupted or faulty message) is where it started.
    kind: OriginKind = "agent_fault" if m.faults else "answer"
    if m.faults:
        detail += f" (injected {'; '.join(m.faults)})"
    return Origin(
        agent=m.sender,
        kind=kind,
        tool=None,
        code=None,
        step=None,
        call_id=None,
        attempts=None,
        http_status=None,
        error=None,
        at=None,
        invocation=m.invocation if m.invocation is not None else -1,
        round=m.round,
        message_id=m.id,
        said=m.label or "",
        detail=detail,
    )
