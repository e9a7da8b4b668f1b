"""What every tool fault kind is: its trigger, the fields it owns, what it may do to a
call, and the plan that decides, call by call, which fault fires.

A kind (errorflow.faults.tool) is one class: its fields, and the handler methods it
overrides. The tool client asks the fault that fired, in this order:

    mangle   the model's call arrives mangled (stage "args")
    before   the call fails (`Failure`), a made-up answer comes back (`Instead`), or
             the tool answers, only slower (`Answered`); None: the tool is called
    item_failure_p  each item of a batch fails with this probability (None: no item does)
    after    the right answer made wrong (a silent fault); `another_entity`: the answer
             for another entity's call, which the tool client serves
    withholds  a per-trial fault (stage "trial"): the task withholds an identifier

Every kind is dumped with the fields the single tool fault shape had (unset ones as
null), so a scenario dumps and hashes (errorflow.scenario.spec.identity) as it always did,
and such a dump loads again: a field another kind owns is accepted while it is null.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

from pydantic import (
    JsonValue,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
    model_validator,
)

from errorflow.core.seeding import stream
from errorflow.core.tool_errors import ToolException
from errorflow.faults.trigger import Trigger

#: The fields of the single tool fault shape, in dump order (after kind, first_n, p).
SHARED_FIELDS = ("status", "retry_after_s", "duration_s", "reason", "mode", "item_p", "error_text")
#: Fields added later: dumped only when set, so older scenarios keep their identity.
ADDED_FIELDS = ("drift", "drop", "value")

Stage = Literal["args", "call", "trial"]


@dataclass(frozen=True)
class Call:
    """What a tool fault may know of the call it strikes."""

    tool: str
    #: The tool's kind (`metric_store`, `report_sink`, ...).
    tool_kind: str
    timeout_s: float


@dataclass(frozen=True)
class Failure:
    """The call fails: the client raises `error`."""

    error: ToolException
    #: The server went on with the call after the client gave up (a send still goes out).
    served: bool = False


@dataclass(frozen=True)
class Instead:
    """The fault answers instead of the tool."""

    value: Any
    business_error: str | None = None
    empty: bool = False


@dataclass(frozen=True)
class Answered:
    """The tool answers, after `latency_s`: the fault leaves the call alone."""

    latency_s: float


Before = Failure | Instead | Answered | None


@dataclass(frozen=True)
class ToolFit:
    """What a fault may need to know of its tool to say whether it can apply there."""

    name: str
    kind: str
    #: Calls fetch several items (batch_fetch, a lookup by an array of keys).
    batch: bool
    #: Why the world has no other entity for this tool to answer for (None: it has one).
    no_other_entity: str | None


class ToolFaultBase(Trigger):
    """One injected tool fault: it fires on the first `first_n` calls, or with
    probability `p` per call, or on every call when neither is given."""

    #: Where it strikes: the model's call ("args"), the call ("call"), the trial ("trial").
    stage: ClassVar[Stage] = "call"
    #: The call succeeds with a wrong answer the caller cannot tell from a right one.
    silent: ClassVar[bool] = False
    #: The answer is another entity's: the tool client serves another entity's call.
    another_entity: ClassVar[bool] = False

    def before(self, call: Call) -> Before:
        return None

    @property
    def item_failure_p(self) -> float | None:
        """The probability each item of a batch fails (None: the items do not fail)."""
        return None

    def after(self, value: JsonValue, rng: random.Random) -> JsonValue:
        """The answer as the fault leaves it (`rng`: the fault's own choices)."""
        return value

    def mangle(
        self, args: Mapping[str, object], required: Sequence[str]
    ) -> dict[str, object] | str:
        """The model's call as it arrives (`required`: the tool's required arguments)."""
        return dict(args)

    def withholds(self, seed: int, trial: int, need: str) -> bool:
        """Whether the task of `trial` withholds the identifier of `need` (stage "trial")."""
        return False

    def misfit(self, tool: ToolFit) -> str | None:
        """Why the fault cannot apply to `tool` (None: it can)."""
        return None

    @model_validator(mode="before")
    @classmethod
    def _without_null_foreign_fields(cls, data: Any) -> Any:
        """A field another kind owns is dropped while it is null (as a stored dump has
        the single shape's); with a value it is refused (`foreign_key`)."""
        if not isinstance(data, dict):
            return data
        return {
            k: v
            for k, v in data.items()
            if not (v is None and k in OWNERS and k not in cls.model_fields)
        }

    @classmethod
    def kind_name(cls) -> str:
        (kind,) = get_args(cls.model_fields["kind"].annotation)
        return str(kind)

    @classmethod
    def foreign_key(cls, key: str, value: object = None) -> str | None:
        """How the scenario's reference words `key` given to this kind (errorflow.
        scenario.explain): a field of other kinds names those that take `value`."""
        owners = OWNERS.get(key)
        if not owners or key in cls.model_fields:
            return None
        takers = [o for o in owners if _takes(o, key, value)] or owners
        kinds = " or ".join(repr(o.kind_name()) for o in takers)
        return f"{key} applies only to kind {kinds}, found kind {cls.kind_name()!r}"

    @model_serializer(mode="wrap")
    def _as_single_shape(self, handler: SerializerFunctionWrapHandler) -> Any:
        own = handler(self)
        if not isinstance(own, dict):
            return own
        out = {name: own.get(name) for name in ("kind", "first_n", "p", *SHARED_FIELDS)}
        out.update({k: own[k] for k in ADDED_FIELDS if own.get(k) is not None})
        out.update({k: v for k, v in own.items() if k not in out and k not in ADDED_FIELDS})
        return out


#: The kinds that own each field a kind may own (filled by errorflow.faults.tool).
OWNERS: dict[str, list[type[ToolFaultBase]]] = {}


def _takes(kind: type[ToolFaultBase], key: str, value: object) -> bool:
    try:
        annotation: Any = kind.model_fields[key].annotation
        TypeAdapter(annotation).validate_python(value)
    except ValidationError:
        return False
    return True


class FaultPlan:
    """Decides, call by call, which injected fault (if any) fires on a tool.

    Each fault has its own random stream, derived from the plan's stream and the fault's
    position, and draws one number on every call whether it fires or not. So the hit
    pattern of a fault depends only on (seed, trial, agent, tool, position): adding a
    fault to another tool, or appending one to this tool, never shifts it."""

    def __init__(
        self,
        faults: Sequence[ToolFaultBase],
        make_rng: Callable[[], random.Random] | None,
    ) -> None:
        """`make_rng` makes the plan's stream, at the first call (most agents never call
        most tools); None for a tool without faults (nothing ever draws from it)."""
        self._faults = list(faults)
        self._rngs: list[random.Random] = []
        self._base = 0
        if self._faults and make_rng is None:
            raise ValueError("a fault plan with faults needs its random stream")
        self._make = make_rng if self._faults else None
        self._picks: dict[int, random.Random] = {}
        self.calls = 0
        #: The position (in this plan's faults) of the fault that fired on the last call.
        self.fired: int | None = None

    def position(self, fault: ToolFaultBase) -> int:
        """Where `fault` (one of this plan's) is among its faults."""
        return next(i for i, f in enumerate(self._faults) if f is fault)

    def next(self) -> ToolFaultBase | None:
        """Advance the call counter and return the first fault that fires. Every fault
        draws, fired or shadowed."""
        if self._make is not None:
            self._base = self._make().getrandbits(64)
            self._rngs = [random.Random(f"{self._base}:{i}") for i in range(len(self._faults))]
            self._make = None
        index = self.calls
        self.calls += 1
        fired: ToolFaultBase | None = None
        self.fired = None
        for position, (fault, rng) in enumerate(zip(self._faults, self._rngs, strict=True)):
            if fault.hits(index, rng.random()) and fired is None:
                fired, self.fired = fault, position
        return fired

    def pick(self) -> random.Random:
        """The stream of the choices the last fault that fired makes (which other
        entity, which digits): a stream of its own, so what it picks never moves the
        draws that decide whether a fault fires."""
        assert self.fired is not None
        rng = self._picks.get(self.fired)
        if rng is None:
            rng = self._picks[self.fired] = random.Random(f"{self._base}:{self.fired}:pick")
        return rng


def plan_for(
    faults: Sequence[ToolFaultBase], stage: Stage, seed: int, trial: int, agent: str, tool: str
) -> tuple[FaultPlan, list[int]]:
    """The plan of a tool's faults of `stage` for one agent in one trial, and where each
    of its faults is in the tool's list. A stream is seeded only when there are faults
    (seeding costs microseconds, per agent, tool and trial; the draws are the same)."""
    places = [i for i, f in enumerate(faults) if f.stage == stage]
    if not places:
        return FaultPlan([], None), places
    names = (agent, tool, *(("mal",) if stage == "args" else ()))
    return FaultPlan([faults[i] for i in places], lambda: stream(seed, trial, *names)), places


def withheld(faults: Sequence[ToolFaultBase], seed: int, trial: int, need: str) -> int | None:
    """The place of the per-trial fault that withholds `need`'s identifier in `trial`
    (the first of the tool's, the one that decides), or None."""
    first = next((i for i, f in enumerate(faults) if f.stage == "trial"), None)
    if first is None or not faults[first].withholds(seed, trial, need):
        return None
    return first
