"""An agent's result message: its payload, written (`to_wire`) and read (`from_wire`).

The payload carries the answer and, under `trace`, simulator bookkeeping for the scorer
and the reports (costs, the codes of the reported failures) that a model never sees.

Writing is exact; reading is defensive, since the payload comes from another agent over
the bus and may be anything. A field of the wrong type reads as absent (its default):
no round is round 0, no costs are None, no answer is an abstention
(`claims.answer_from_wire`), a stop that is not a string is no stop. One exception: an
entry of `trace.failures` that is not a known code still says the sender failed, so it
reads as `internal_error` rather than vanishing (a message that says it failed stays
touched for the scorer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from pydantic import JsonValue

from errorflow.core.costs import Costs
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol.claims import FinalAnswer, answer_from_wire, answer_to_wire
from errorflow.protocol.envelope import Envelope, JsonObject
from errorflow.protocol.stop import StopReason


@dataclass(frozen=True)
class FaultMark:
    """An injected agent fault that shaped a message (an entry of `trace.faults`): on
    what (`recipient`, the claims it rewrote, the delay it added)."""

    kind: str
    recipient: str | None = None
    claims: tuple[str, ...] = ()
    delay_s: float = 0.0

    def to_wire(self) -> JsonObject:
        wire: JsonObject = {"kind": self.kind}
        if self.recipient is not None:
            wire["to"] = self.recipient
        if self.claims:
            wire["claims"] = list(self.claims)
        if self.delay_s:
            wire["delay_s"] = self.delay_s
        return wire

    @classmethod
    def from_wire(cls, data: object) -> FaultMark | None:
        """None for an entry without a string `kind`."""
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            return None
        to, claims = data.get("to"), data.get("claims")
        return cls(
            data["kind"],
            to if isinstance(to, str) else None,
            tuple(map(str, claims)) if isinstance(claims, list) else (),
            _number(data.get("delay_s")) or 0.0,
        )

    @property
    def text(self) -> str:
        """`kind: what it did`, for the reports."""
        what = ", ".join(self.claims) or (f"{self.delay_s:g} s late" if self.delay_s else "")
        return f"{self.kind}: {what}" if what else self.kind


@dataclass(frozen=True)
class ResultPayload:
    role: str
    round: int
    answer: FinalAnswer
    stopped: StopReason | None
    #: None: nothing to report (a crash, or a copy whose costs another recipient's
    #: copy already carries); on the wire `{}`.
    costs: Costs | None
    failures: list[ErrorCode]
    #: The agent's policy decisions, counted (errorflow.agents.policy_tally); sent with
    #: the costs, once.
    policy: dict[str, float] = field(default_factory=dict)
    #: Run time at which the agent finished (runs whose state lives across trials).
    ended_at: float | None = None
    #: Injected tool faults that fired on the agent's calls, by their place in the
    #: scenario; sent with the costs, once (errorflow.faults.tool_tally).
    tool_faults: dict[str, int] = field(default_factory=dict)
    #: Injected model faults that failed the agent's model attempts, by their place in
    #: the scenario; sent with the costs, once (errorflow.faults.model_tally).
    model_faults: dict[str, int] = field(default_factory=dict)
    #: Injected agent faults that shaped this copy (`trace.faults`).
    faults: tuple[FaultMark, ...] = ()
    #: A dropped or hung copy: the fault's kind; the recipient gets a marker, not the
    #: message (errorflow.agents.late_inputs).
    withheld: str | None = None
    #: A slow copy: simulated seconds it arrives late.
    delay_s: float = 0.0

    def without_costs(self) -> ResultPayload:
        return replace(self, costs=None, policy={}, tool_faults={}, model_faults={})

    def to_wire(self) -> JsonObject:
        costs: dict[str, JsonValue] = {}
        if self.costs is not None:
            costs.update(self.costs.to_wire())
        trace: JsonObject = {"costs": costs, "failures": [code.value for code in self.failures]}
        if self.policy:
            trace["policy"] = dict(self.policy)
        if self.tool_faults:
            trace["tool_faults"] = dict(self.tool_faults)
        if self.model_faults:
            trace["model_faults"] = dict(self.model_faults)
        if self.faults:
            trace["faults"] = [f.to_wire() for f in self.faults]
        wire: JsonObject = {
            "role": self.role,
            "round": self.round,
            "answer": answer_to_wire(self.answer),
            "stopped": None if self.stopped is None else self.stopped.wire,
            "trace": trace,
        }
        if self.ended_at is not None:
            wire["t"] = self.ended_at
        if self.withheld is not None:
            wire["withheld"] = self.withheld
        if self.delay_s:
            wire["delay_s"] = self.delay_s
        return wire

    @classmethod
    def from_wire(cls, payload: Mapping[str, object]) -> ResultPayload:
        """The payload of a result (or of a task an agent sent back), read defensively
        (see the module's docstring)."""
        trace = _trace(payload)
        role, withheld = payload.get("role"), payload.get("withheld")
        costs = trace.get("costs")
        return cls(
            role=role if isinstance(role, str) else "",
            round=round_of(payload),
            answer=answer_from_wire(payload.get("answer")),
            stopped=_stop(payload.get("stopped")),
            costs=Costs.from_wire(costs) if isinstance(costs, dict) and costs else None,
            failures=failures_of(payload),
            policy=_floats(trace.get("policy")),
            ended_at=_number(payload.get("t")),
            tool_faults=_counts(trace.get("tool_faults")),
            model_faults=_counts(trace.get("model_faults")),
            faults=_marks(trace.get("faults")),
            withheld=None if not withheld else str(withheld),
            delay_s=_number(payload.get("delay_s")) or 0.0,
        )


class Readings:
    """The result payloads of one trial's messages, each read once for every reader of
    the trial in this process (the scorer, then the root cause as the trial ends): a
    reading stands for the envelope it was read from, the same object, and lives as
    long as the trial's rows do."""

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[str, tuple[Envelope, ResultPayload]] = {}

    def of(self, env: Envelope) -> ResultPayload:
        """`ResultPayload.from_wire(env.payload)`, read once."""
        hit = self._by_id.get(env.id)
        if hit is not None and hit[0] is env:
            return hit[1]
        parsed = ResultPayload.from_wire(env.payload)
        self._by_id[env.id] = (env, parsed)
        return parsed


def read_all(messages: Iterable[Envelope], readings: Readings | None) -> dict[str, ResultPayload]:
    """Each message's payload by its id, read through `readings` when given."""
    read = (readings or Readings()).of
    return {m.id: read(m) for m in messages}


def answer_of(payload: Mapping[str, object]) -> FinalAnswer:
    """`ResultPayload.from_wire(payload).answer`, without reading the rest."""
    return answer_from_wire(payload.get("answer"))


def lateness(payload: Mapping[str, object]) -> tuple[str | None, float]:
    """A copy's `withheld` and `delay_s` as `ResultPayload.from_wire` reads them, without
    reading the rest (a recipient asks it of every input)."""
    withheld = payload.get("withheld")
    return (None if not withheld else str(withheld)), _number(payload.get("delay_s")) or 0.0


def tool_faults_of(payload: Mapping[str, object]) -> dict[str, int]:
    """`ResultPayload.from_wire(payload).tool_faults`, without reading the rest."""
    return _counts(_trace(payload).get("tool_faults"))


def model_faults_of(payload: Mapping[str, object]) -> dict[str, int]:
    """`ResultPayload.from_wire(payload).model_faults`, without reading the rest."""
    return _counts(_trace(payload).get("model_faults"))


def round_of(payload: Mapping[str, object]) -> int:
    """The round a task or result is for (0 when it says none, or not as an integer)."""
    value = payload.get("round", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def failures_of(payload: Mapping[str, object]) -> list[ErrorCode]:
    """The codes of the failures the sender reports (`trace.failures`); cheaper than
    `ResultPayload.from_wire` for readers that need only these."""
    failures = _trace(payload).get("failures")
    return [_code(f) for f in failures] if isinstance(failures, list) else []


class CarriesPayload(Protocol):
    """A message as far as its payload goes (an `Envelope` is one)."""

    @property
    def sender(self) -> str: ...

    @property
    def payload(self) -> Mapping[str, object]: ...


def infra_reason(messages: Iterable[CarriesPayload]) -> str | None:
    """The reason the first message reporting an infrastructure fault gives (its
    answer's text), or None when no message reports one."""
    for m in messages:
        if ErrorCode.INFRA_FAULT in failures_of(m.payload):
            text = answer_from_wire(m.payload.get("answer")).text
            return text or f"infrastructure fault at {m.sender}"
    return None


def _trace(payload: Mapping[str, object]) -> Mapping[str, object]:
    trace = payload.get("trace")
    return trace if isinstance(trace, dict) else {}


def _code(value: object) -> ErrorCode:
    return (
        _CODES.get(value, ErrorCode.INTERNAL_ERROR)
        if isinstance(value, str)
        else ErrorCode.INTERNAL_ERROR
    )


_CODES = {c.value: c for c in ErrorCode}  # a lookup: `ErrorCode(value)` is several calls


def _stop(value: object) -> StopReason | None:
    return StopReason.from_wire(value) if isinstance(value, str) else None


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None  # type: ignore[arg-type]


def _floats(raw: object) -> dict[str, float]:
    """A string-keyed map of numbers, as floats; other entries are dropped."""
    if not isinstance(raw, dict):
        return {}
    return {k: float(v) for k, v in raw.items() if isinstance(k, str) and _number(v) is not None}


def _counts(raw: object) -> dict[str, int]:
    """A string-keyed map of integer counts; other entries are dropped."""
    if not isinstance(raw, dict):
        return {}
    return {
        k: v
        for k, v in raw.items()
        if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
    }


def _marks(raw: object) -> tuple[FaultMark, ...]:
    marks = (FaultMark.from_wire(f) for f in raw) if isinstance(raw, list) else ()
    return tuple(m for m in marks if m is not None)
