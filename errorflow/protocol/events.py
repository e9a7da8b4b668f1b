"""Telemetry events: every kind an agent or the runner publishes, as one typed union.

An event travels as the payload of an `event` envelope, flat, with its kind under
`type` (`{"type": "retry", "agent": "researcher", "tool": ..., ...}`): the wire shape is
the model's JSON. Producers build a model and call `to_payload`; consumers call
`parse_event` and match on the class, so a field name lives in one place. A payload
that is not a known event parses to None (counted by the consumer, never a crash).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from errorflow.core.taxonomy import ErrorCode


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_payload(self, at: float | None = None) -> dict[str, Any]:
        """The wire payload; an event not stamped yet (`at` None) takes `at` (the agent's
        run time, stamped here rather than by a copy of the model) or goes without."""
        # `model_dump`'s own serializer, without its keyword handling (a third of it)
        payload: dict[str, Any] = self.__pydantic_serializer__.to_python(
            self, mode="json", by_alias=True
        )
        if payload.get("at", 0.0) is None:
            if at is None:  # not stamped (a gate used on its own)
                del payload["at"]
            else:
                payload["at"] = at
        return payload


class AgentStart(_Event):
    type: Literal["agent_start"] = "agent_start"
    agent: str
    inputs: list[str]
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class ToolCallEvent(_Event):
    """One tool call as the gate finished it (after retries), arguments redacted."""

    type: Literal["tool_call"] = "tool_call"
    agent: str
    tool: str
    call_id: str
    args: dict[str, Any]
    ok: bool
    code: ErrorCode | None = None
    attempts: int
    http_status: int | None = None
    error: str | None = None
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None
    #: The injected faults that fired on the call's attempts, by their place in the
    #: scenario (`tools.kpi.faults[0]`), in order; a silent one leaves `ok` true.
    faults: list[str] = Field(default_factory=list)
    #: Of `faults`, those that answer wrong but succeed (stale, wrong_entity, corrupt):
    #: the call is ok and its value is not the truth.
    silent: list[str] = Field(default_factory=list)

    def to_payload(self, at: float | None = None) -> dict[str, Any]:
        payload = super().to_payload(at)
        for key in ("faults", "silent"):
            if not payload[key]:  # most calls: the wire stays as it was
                del payload[key]
        return payload


class GuardBlock(_Event):
    type: Literal["guard"] = "guard"
    agent: str
    tool: str
    code: ErrorCode
    message: str
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class BreakerChange(_Event):
    """A circuit breaker transition (`tool` is "model" for the model's breaker)."""

    type: Literal["breaker"] = "breaker"
    agent: str
    tool: str
    pattern: str | None = None
    frm: str = Field(alias="from")
    to: str
    at: float
    reason: str


class RetryScheduled(_Event):
    type: Literal["retry"] = "retry"
    agent: str
    tool: str
    attempt: int
    code: ErrorCode
    delay_s: float
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class RetriesExhausted(_Event):
    type: Literal["retries_exhausted"] = "retries_exhausted"
    agent: str
    tool: str
    attempts: int
    code: ErrorCode
    reason: str
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class ModelError(_Event):
    type: Literal["model_error"] = "model_error"
    agent: str
    code: ErrorCode
    status: int | None = None
    attempt: int
    retry: bool
    delay_s: float
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class ModelCall(_Event):
    type: Literal["model_call"] = "model_call"
    agent: str
    input_tokens: int
    output_tokens: int
    calls: int
    final: bool
    stop_reason: str | None = None
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None
    #: The request and the reply as JSON text, redacted and clipped: only when the
    #: agent's model records its content (`model.record_content`), else left out.
    prompt: str | None = None
    response: str | None = None

    def to_payload(self, at: float | None = None) -> dict[str, Any]:
        payload = super().to_payload(at)
        for name in ("prompt", "response"):
            if payload.get(name) is None:
                del payload[name]
        return payload


class LoopStop(_Event):
    """The agent's loop ended by a policy or a failure, not by a final answer."""

    type: Literal["loop_stop"] = "loop_stop"
    agent: str
    code: str
    stopped: str
    steps: int
    #: A python agent's own code failed: what it raised (redacted, cut), or why what it
    #: returned is no answer. Observers only: the wire's errors carry the class alone.
    error: str | None = Field(default=None, max_length=2000)
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class LabelEvent(_Event):
    """The scorer's label of one message (published by the runner)."""

    type: Literal["label"] = "label"
    message_id: str
    agent: str
    label: str
    reason: str


class TrialOutcomeEvent(_Event):
    type: Literal["trial_outcome"] = "trial_outcome"
    outcome: str
    depth: int
    reason: str


class CallRefused(_Event):
    """A client-side limit refused an attempt before it went out: the rate limiter (no
    permit within its timeout) or the bulkhead (too many calls of the tool in flight)."""

    type: Literal["call_refused"] = "call_refused"
    agent: str
    tool: str
    by: Literal["limiter", "bulkhead"]
    waited_s: float = 0.0
    at: float = 0.0


class ModelFaultFired(_Event):
    """An injected model fault (`agents.NAME.model.faults`) failed one attempt of a model
    call; the gate's `model_error` for the attempt follows."""

    type: Literal["model_fault"] = "model_fault"
    agent: str
    #: The fault's place in the scenario (`agents.writer.model.faults[0]`).
    fault: str
    kind: str
    status: int | None = None
    #: The trial's model call (0: the first) and its attempt (1: the first).
    call: int
    attempt: int
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class AgentCrashed(_Event):
    """An injected crash (`agents.NAME.faults`, kind crash) killed the agent at a model
    call: its trial (in-process) or its whole process (`process`: an `errorflow agent`)."""

    type: Literal["agent_crashed"] = "agent_crashed"
    agent: str
    #: The fault's place in the scenario (`agents.writer.faults[1]`).
    fault: str
    #: The trial's model call it struck (0: the first).
    call: int
    process: bool = False
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class DefenceActed(_Event):
    """A defence changed what an agent relies on: its inspector corrected or blocked
    claims of a message from `about`, or, as a challenger, it overruled claims it had
    received with what its own tools said (errorflow.scenario.spec.defence_model)."""

    type: Literal["defence"] = "defence"
    agent: str
    defence: Literal["inspector", "challenger"]
    about: str
    corrected: list[str] = Field(default_factory=list)
    blocked: list[str] = Field(default_factory=list)
    #: Tool calls the defence made for this message (the inspector's checks).
    calls: int = 0
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class AgentFaultFired(_Event):
    """An injected agent fault (`agents.NAME.faults`: corrupt, faulty, drop, hang,
    slow) struck the agent's answer or one copy of it on its way to `recipient`."""

    type: Literal["agent_fault"] = "agent_fault"
    agent: str
    kind: str
    recipient: str | None = None
    #: The claims it rewrote (corrupt, faulty).
    claims: list[str] = Field(default_factory=list)
    delay_s: float = 0.0
    #: Run time (simulated seconds) at which it happened, stamped by the agent.
    at: float | None = None


class BusFaultFired(_Event):
    """An injected bus fault (the scenario's `bus:` block) struck one send of a task or
    result message, published by its sender's endpoint before the message itself."""

    type: Literal["bus_fault"] = "bus_fault"
    sender: str
    recipient: str
    #: partition, drop, duplicate, delay or reorder (errorflow.faults.bus)
    kind: str
    message_id: str
    #: The send it struck: 1 the first, 2 the first resend, ...
    attempt: int
    #: Run time (simulated seconds) of that send.
    at: float

    @property
    def agent(self) -> str:
        """Who reports it, like every agent event: the sender."""
        return self.sender


class BusUndelivered(_Event):
    """A message the bus faults kept from its recipient through every resend: its
    trial cannot finish (`bus_fault`, with `reason`)."""

    type: Literal["bus_undelivered"] = "bus_undelivered"
    sender: str
    recipient: str
    message_id: str
    sends: int
    reason: str
    at: float

    @property
    def agent(self) -> str:
        return self.sender


#: Events an agent emits while it works (the runner adds labels and outcomes).
AgentEvent = (
    AgentStart
    | CallRefused
    | ToolCallEvent
    | GuardBlock
    | BreakerChange
    | RetryScheduled
    | RetriesExhausted
    | ModelError
    | ModelCall
    | LoopStop
    | ModelFaultFired
    | AgentCrashed
    | AgentFaultFired
    | DefenceActed
)

#: Every event on the wire, told apart by its `type`.
Event = Annotated[
    AgentEvent | LabelEvent | TrialOutcomeEvent | BusFaultFired | BusUndelivered,
    Field(discriminator="type"),
]

#: How the gates hand an event to their agent (which stamps trial and trace and sends it).
Emit = Callable[[AgentEvent], None]

_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(payload: object) -> Event | None:
    """The typed event of an envelope payload; None if it is not a known event."""
    try:
        return _ADAPTER.validate_python(payload)
    except ValidationError:
        return None


def event_type(payload: Mapping[str, object]) -> str:
    """The kind an event payload says it is (`""` if none), known or not."""
    return str(payload.get("type", ""))


@dataclass(frozen=True)
class EventFacts:
    """What any event payload says, read without parsing it into its model: the
    fields the reports show for every event, a kind they do not know included."""

    type: str
    tool: str | None
    code: str | None
    #: Run time (simulated seconds) at which it happened, where the event says it.
    at: float | None
    #: A backoff, where the event has one.
    delay_s: float | None
    #: Every field but `type` and `agent`, as sent.
    fields: dict[str, Any]

    @classmethod
    def from_wire(cls, payload: Mapping[str, Any]) -> EventFacts:
        tool, code = payload.get("tool"), payload.get("code")
        return cls(
            type=event_type(payload),
            tool=tool if isinstance(tool, str) else None,
            code=None if code is None else str(code),
            at=_number(payload.get("at")),
            delay_s=_number(payload.get("delay_s")),
            fields={k: v for k, v in payload.items() if k not in ("type", "agent")},
        )


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None  # type: ignore[arg-type]
