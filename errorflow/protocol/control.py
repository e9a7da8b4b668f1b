"""Control messages: the run's coordination protocol, one typed model per action.

A control envelope's payload is one of these models' JSON (`{"action": "hello", ...}`).
Senders build a model; receivers call `parse_control` and match on the class. The
actions, in the order of a run: the runner calls the roll (`roll_call`, carrying the
public scenario so a joining agent or an attached TUI knows the experiment), agents
answer `hello`; reliable messages are acknowledged with `ack`; the runner sends `stop`
(agents finish and say `bye`) and then `end` (nothing of the runner's follows).

Liveness (errorflow/runtime/liveness.py): an agent process sends `alive` every second
while it takes part, and its MQTT last will, signed when its session opened and published
by the broker when the session ends without a goodbye, is `gone`. Both name the agent's
`session`, a random token per process (also in its `hello`), so the runner tells a
restarted agent (a new session, which lost its work) from one that reconnected, and
ignores the will of a session that is no longer the agent's.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from errorflow.core.outside_time import REPORTED_TRIALS
from errorflow.protocol.envelope import MAX_TRACE_ID_CHARS


class ControlAction(StrEnum):
    ROLL_CALL = "roll_call"
    HELLO = "hello"
    ALIVE = "alive"
    GONE = "gone"
    BYE = "bye"
    ACK = "ack"
    STOP = "stop"
    END = "end"


class _Control(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class RollCall(_Control):
    action: Literal[ControlAction.ROLL_CALL] = ControlAction.ROLL_CALL
    scenario: dict[str, Any]  # the public (redacted) scenario as JSON
    #: Digests of the files its python agents and tools are in, by place (none: no such)
    code: dict[str, str] = Field(default_factory=dict)


class Hello(_Control):
    action: Literal[ControlAction.HELLO] = ControlAction.HELLO
    agent: str
    session: str = ""  # the agent process's random token ("": one that does not say)


class TrialOutside(_Control):
    """An agent's time outside errorflow in one trial (errorflow/core/outside_time.py)."""

    trace_id: str = Field(max_length=MAX_TRACE_ID_CHARS)
    spent_s: float = Field(ge=0, allow_inf_nan=False)
    waiting: bool  # a call of the trial is outside now


class Alive(_Control):
    """A heartbeat: the agent's session still works (sent every `HEARTBEAT_S`). An agent
    also says here the trials whose calls were outside errorflow lately, so the runner
    does not count that time against their trial timeout."""

    action: Literal[ControlAction.ALIVE] = ControlAction.ALIVE
    agent: str
    session: str
    outside: tuple[TrialOutside, ...] = Field(default=(), max_length=REPORTED_TRIALS)
    #: The process whose calls `outside` counts (its agents all report them).
    outside_from: str = Field(default="", max_length=64)


class Gone(_Control):
    """An agent's last will: its session ended without a goodbye. Only a hint: the
    runner then calls the roll, and gives up on the agent only if it stays silent."""

    action: Literal[ControlAction.GONE] = ControlAction.GONE
    agent: str
    session: str


class Bye(_Control):
    action: Literal[ControlAction.BYE] = ControlAction.BYE
    agent: str


class Ack(_Control):
    action: Literal[ControlAction.ACK] = ControlAction.ACK
    id: str


class Stop(_Control):
    action: Literal[ControlAction.STOP] = ControlAction.STOP


class End(_Control):
    action: Literal[ControlAction.END] = ControlAction.END


Control = Annotated[
    RollCall | Hello | Alive | Gone | Bye | Ack | Stop | End, Field(discriminator="action")
]

_ADAPTER: TypeAdapter[Control] = TypeAdapter(Control)


def parse_control(payload: object) -> Control | None:
    """The typed action of a control payload; None if it is not a valid one."""
    try:
        return _ADAPTER.validate_python(payload)
    except ValidationError:
        return None


def is_ack(payload: Mapping[str, object]) -> bool:
    """An ack, told without parsing: acks are most of the control traffic and say
    nothing but what they acknowledge, so receivers skip or route them on this alone."""
    return payload.get("action") == _ACK


def ack_payload(message_id: str) -> dict[str, Any]:
    """`Ack(id=message_id).to_payload()` without building the model (a receiver sends
    one for every task and result it gets)."""
    return {"action": _ACK, "id": message_id}


def acked_id(payload: Mapping[str, object]) -> str | None:
    """The message an ack payload acknowledges, as `parse_control` reads it, without
    parsing: None unless it is exactly an ack (a malformed ack acknowledges nothing)."""
    message_id = payload.get("id")
    if payload.get("action") != _ACK or not isinstance(message_id, str) or len(payload) != 2:
        return None
    return message_id


#: Hoisted: looking a member up on its enum class costs a hot path 0.2 us each time.
_ACK = ControlAction.ACK.value
