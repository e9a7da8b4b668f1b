"""The `bus:` block: faults injected into the messages between agents, and how hard the
end-to-end acknowledgements try to recover them.

The block is checked here (shapes) and by `bus_problems` (names: a partition between
participants that exist and talk to each other); `plan` turns it into the pure
`BusFaultPlan` every endpoint of the run holds (errorflow.bus.bus_faults). The default
block is empty: a scenario without one dumps, hashes and runs as if the block did not exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from errorflow.bus.bus_faults import BusFaultPlan, Partition
from errorflow.protocol import topics
from errorflow.scenario.checks.reference_problem import Reference, unknown
from errorflow.scenario.fault_model import Probability
from errorflow.scenario.spec.service_model import MAX_RUN_S
from errorflow.scenario.spec.world_model import Ident, Strict

if TYPE_CHECKING:
    from errorflow.scenario.spec.model import Scenario


class BusFaultRate(Strict):
    """Fires on each send of a task or result message with probability `p`."""

    p: Probability


class BusDelay(BusFaultRate):
    """The message is published `seconds` later: simulated seconds, waited as
    `seconds * time_scale` real seconds (like every simulated wait)."""

    seconds: float = Field(gt=0, le=3600)


class PartitionWindow(Strict):
    """Messages between the two (either way) are lost from `from_s` to `to_s` of run
    time (a trial's own simulated time when trials do not share a run clock)."""

    between: list[Ident] = Field(min_length=2, max_length=2)
    from_s: float = Field(ge=0, le=MAX_RUN_S)
    to_s: float = Field(gt=0, le=MAX_RUN_S)

    @model_validator(mode="after")
    def _window(self) -> PartitionWindow:
        if self.to_s <= self.from_s:
            raise ValueError(f"to_s ({self.to_s:g}) must be after from_s ({self.from_s:g})")
        if self.between[0] == self.between[1]:
            raise ValueError(
                f"a partition is between two participants, found {self.between[0]!r} twice"
            )
        return self


class BusFaultSpec(Strict):
    drop: BusFaultRate | None = None
    delay: BusDelay | None = None
    duplicate: BusFaultRate | None = None
    #: Hold a message back and publish it after the sender's next one.
    reorder: BusFaultRate | None = None
    partitions: list[PartitionWindow] = Field(default_factory=list, max_length=64)
    #: The end-to-end acks: first resend after this many seconds, doubling (None: 2 s).
    ack_timeout_s: float | None = Field(default=None, gt=0, le=60)
    #: Resends before a message is given up (None: 6).
    max_resends: int | None = Field(default=None, ge=0, le=20)

    @property
    def configured(self) -> bool:
        """Whether the block says anything (an empty block changes nothing)."""
        return self != BusFaultSpec()

    def plan(self, seed: int, time_scale: float) -> BusFaultPlan | None:
        """What the endpoints carry out; None for an empty block (no draws at all)."""
        if not self.configured:
            return None
        return BusFaultPlan(
            seed=seed,
            drop_p=self.drop.p if self.drop else 0.0,
            duplicate_p=self.duplicate.p if self.duplicate else 0.0,
            delay_p=self.delay.p if self.delay else 0.0,
            delay_s=self.delay.seconds if self.delay else 0.0,
            reorder_p=self.reorder.p if self.reorder else 0.0,
            partitions=tuple(
                Partition(w.between[0], w.between[1], w.from_s, w.to_s) for w in self.partitions
            ),
            time_scale=time_scale,
            ack_timeout_s=self.ack_timeout_s,
            max_resends=self.max_resends,
        )


def bus_plan(scenario: Scenario) -> BusFaultPlan | None:
    """The run's bus faults, for every endpoint of it (agents and runner alike)."""
    return scenario.bus.plan(scenario.seed, scenario.time_scale)


def bus_problems(s: Scenario) -> Iterator[Reference]:
    """Partitions must name participants: agents, or `runner` (a partition between two
    that never exchange a message is allowed, and reported as never fired)."""
    names = [*s.agents, topics.RUNNER]
    for i, window in enumerate(s.bus.partitions):
        for j, name in enumerate(window.between):
            if name not in names:
                loc = ("bus", "partitions", i, "between", j)
                yield Reference(loc, unknown("agent", name, names), name)
