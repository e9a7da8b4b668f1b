"""The scenario's faults checked against the rest of it, each at the path that names it.

A fault's own shape is its family's (errorflow.faults); whether it fits where it is
written needs the rest of the scenario: a `partial` fault on a tool that fetches one
item, a silent fault that could never be wrong (another entity where the world has only
one, a receipt from a report sink: it would be counted as fired while measuring the
fault-free path, so it is refused rather than run), a partition naming a participant
that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping

from errorflow.faults.bus import BusFaultSpec
from errorflow.faults.tool_base import ToolFit
from errorflow.protocol import topics
from errorflow.scenario.checks.reference_problem import Reference, unknown
from errorflow.scenario.spec.tool_model import ToolSpec
from errorflow.scenario.spec.world_model import WorldSpec


def fault_problems(
    tools: Mapping[str, ToolSpec], world: WorldSpec, is_batch: Callable[[str], bool]
) -> Iterator[Reference]:
    """Each tool fault that cannot apply to its tool, at its `kind`."""
    for name, tool in tools.items():
        if not tool.faults:
            continue
        fit = ToolFit(name, tool.kind, is_batch(name), _no_other_entity(tool, world))
        for i, fault in enumerate(tool.faults):
            why = fault.misfit(fit)
            if why is not None:
                yield Reference(("tools", name, "faults", i, "kind"), why, fault.kind)


def _no_other_entity(spec: ToolSpec, world: WorldSpec) -> str | None:
    """Why the tool has no other entity to answer for, or None when it has one (a
    Python tool's arguments are known once its code is imported: checked then,
    errorflow.scenario.checks.source_checks)."""
    if spec.kind == "metric_store" and len(world.metrics) < 2:
        return "world.metrics has fewer than two metrics"
    if spec.kind == "paper_search" and len({p.topic for p in world.papers}) < 2:
        return "world.papers has fewer than two topics"
    if spec.kind == "batch_fetch" and len(world.documents) < 2:
        return "world.documents has fewer than two documents"
    if spec.kind in ("lookup", "search"):
        table = world.tables.get(spec.table or "")
        if table is not None and len(table.rows) < 2:
            return f"table {spec.table!r} has one row"
    return None


def bus_problems(agents: Collection[str], bus: BusFaultSpec) -> Iterator[Reference]:
    """Partitions must name participants: agents, or `runner` (a partition between two
    that never exchange a message is allowed, and reported as never fired)."""
    names = [*agents, topics.RUNNER]
    for i, window in enumerate(bus.partitions):
        for j, name in enumerate(window.between):
            if name not in names:
                loc = ("bus", "partitions", i, "between", j)
                yield Reference(loc, unknown("agent", name, names), name)
