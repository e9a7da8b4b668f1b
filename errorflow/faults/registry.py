"""The fault families, in one table: where a scenario writes each, and its kinds with
the class that is each kind's spec. The reference (scenarios/FORMAT.md) documents every
kind listed here (tests/test_faults_registry.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import get_args

from pydantic import BaseModel

from errorflow.faults import (
    agent,
    bus,
    crash,
    model,
    tool,
)


@dataclass(frozen=True)
class Family:
    name: str
    #: Where a scenario writes its faults.
    place: str
    #: Each kind and the spec it is validated with.
    kinds: Mapping[str, type[BaseModel]]


def _tagged(union: object) -> dict[str, type[BaseModel]]:
    """kind -> class, for a union of specs tagged by `kind` (Annotated[A | B, ...])."""
    members = get_args(get_args(union)[0])
    return {get_args(m.model_fields["kind"].annotation)[0]: m for m in members}


FAMILIES: tuple[Family, ...] = (
    Family("tool", "tools.NAME.faults", tool.KINDS),
    Family(
        "agent",
        "agents.NAME.faults",
        {k: c for k, c in _tagged(agent.AgentFault).items() if c is not crash.CrashFault},
    ),
    Family("crash", "agents.NAME.faults", {"crash": crash.CrashFault}),
    Family(
        "model", "agents.NAME.model.faults", dict.fromkeys(model.DEFAULT_STATUS, model.ModelFault)
    ),
    Family("bus", "bus", dict.fromkeys(bus.KINDS, bus.BusFaultSpec)),
)


def family(name: str) -> Family:
    return next(f for f in FAMILIES if f.name == name)
