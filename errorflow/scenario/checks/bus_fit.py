"""Whether a scenario fits on the bus: the roll call that carries it must be a message
every receiver accepts.

The runner calls the roll with the whole public scenario (`roll_call`), so agents and
attached TUIs know the experiment. A roll call over the bus's message limit, or too
deep or too large for a receiver to walk, is refused at the edge of every receiver:
no agent answers, and the run would wait for agents that never hear it. The loader
therefore builds the roll call as the runner sends it, with the longest header a run
can give it, and hands it to the receivers' own `decode`: what `validate` accepts,
the bus carries.
"""

from __future__ import annotations

from collections.abc import Mapping

import pydantic_core

from errorflow.protocol import topics
from errorflow.protocol.control import RollCall
from errorflow.protocol.envelope import (
    MAX_MESSAGE_BYTES,
    Envelope,
    Kind,
    RejectedMessage,
    decode,
)
from errorflow.scenario.problems import (
    LIMITS_HINT,
    Marks,
    NodePath,
    Problem,
    problem_at,
)
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import Scenario

#: The longest header a roll call can carry: an envelope's trace id holds at most 64
#: characters, `{run_id}-presence`, so a run id of 55; ids and signatures are 64.
_RUN_ID = "r" * 55
_ID = "0" * 64
_SEQ = 10**15  # a roll call is repeated while agents join: its seq grows
_TS = 9_999_999_999.123457  # the widest wall clock the JSON will hold for centuries
_KEY = bytes(32)  # the signature's length does not depend on the key


def roll_call(scenario: Scenario) -> RollCall:
    """The roll call the runner sends: the public (redacted) scenario, its code's digests."""
    return RollCall(scenario=identity.public(scenario), code=identity.code_of(scenario))


def roll_call_bytes(scenario: Scenario) -> bytes:
    """The roll call of `scenario` as it travels, signed, with the longest header."""
    envelope = Envelope(
        id=_ID,
        run_id=_RUN_ID,
        trial=0,
        seq=_SEQ,
        sender=topics.RUNNER,
        recipient="all",
        kind=Kind.CONTROL,
        trace_id=f"{_RUN_ID}-presence",
        payload=roll_call(scenario).to_payload(),
        ts=_TS,
    )
    return envelope.encode(_KEY)


def bus_problems(scenario: Scenario, marks: Marks) -> list[Problem]:
    """The roll call refused by its receivers, said at the part of the scenario that
    weighs most; nothing when it travels."""
    raw = roll_call_bytes(scenario)
    try:
        decode(raw)
    except RejectedMessage as exc:
        public = identity.public(scenario)
        at, size = heaviest(public)
        part = f"this field holds {size:,} bytes of it" if at else "the scenario as a whole"
        if exc.reason == "too_large":
            why = (
                f"encodes to {len(raw):,} bytes, over the bus message limit of "
                f"{MAX_MESSAGE_BYTES:,} ({part})"
            )
        else:  # too deep, or too many values, for a receiver to walk
            why = f"would be refused by every receiver: {exc.detail}"
        message = (
            f"the scenario does not fit on the bus: the roll call that carries it to the "
            f"agents {why}; expected a smaller scenario ({LIMITS_HINT})"
        )
        return [problem_at(marks, at, message)]
    return []


def heaviest(data: Mapping[str, object]) -> tuple[NodePath, int]:
    """The path of the part of `data` that weighs most, and its encoded size: the
    largest field, then its largest part while that part is most of it."""
    at: NodePath = ()
    node: object = data
    size = len(pydantic_core.to_json(data))
    while isinstance(node, dict | list) and node:
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        weights = [(len(pydantic_core.to_json(value)), key) for key, value in items]
        weight, key = max(weights, key=lambda w: w[0])
        if at and weight * 2 < size:
            break  # no single part dominates: this node is the one to shrink
        at, node, size = (*at, key), node[key], weight
    return at, size
