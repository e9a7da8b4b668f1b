"""The genealogy of one trial as typed nodes: its messages, its invocations (each time
an agent worked on it), their tool calls, failures and decisions (errorflow.scoring.
genealogy builds them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

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
    #: Injected faults that answered it wrong but ok (stale, wrong_entity, corrupt), by
    #: their place in the scenario.
    silent: tuple[str, ...] = ()


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
    #: Agent processes an injected crash killed mid-work (they sent nothing of it):
    #: (agent, what struck it).
    crashes: tuple[tuple[str, str], ...] = field(default=())

    def message(self, mid: str) -> MessageNode:
        return next(m for m in self.messages if m.id == mid)

    def by_id(self) -> dict[str, MessageNode]:
        return {m.id: m for m in self.messages}
