"""What a silent tool fault (`stale`, `wrong_entity`, `corrupt`) needs to mean
something, checked at the path that names it.

A silent fault succeeds with a wrong answer; one that could never be wrong (another
entity where the world has only one, a receipt from a report sink) would be counted as
fired while measuring the fault-free path, so it is refused rather than run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from errorflow.scenario.checks.reference_problem import Loc, Reference
from errorflow.scenario.fault_model import CORRUPT_MODES, SILENT_KINDS

if TYPE_CHECKING:
    from errorflow.scenario.fault_model import FaultSpec
    from errorflow.scenario.spec.model import Scenario


def silent_fault_problems(
    s: Scenario, tool: str, index: int, fault: FaultSpec
) -> Iterator[Reference]:
    at: Loc = ("tools", tool, "faults", index)
    for name in ("drift", "drop", "value"):
        if getattr(fault, name) is not None and fault.kind != "stale":
            msg = f"{name} applies only to kind 'stale', found kind {fault.kind!r}"
            yield Reference((*at, name), msg, getattr(fault, name))
    if fault.kind == "stale" and fault.value is not None:
        for name in ("drift", "drop"):
            if getattr(fault, name) is not None:
                msg = f"give the stale answer (value) or how it is off ({name}), not both"
                yield Reference((*at, name), msg, getattr(fault, name))
    if fault.drift == 0:
        yield Reference((*at, "drift"), "a drift of 0 leaves the answer right", fault.drift)
    if fault.mode is not None and fault.kind == "corrupt" and fault.mode not in CORRUPT_MODES:
        msg = f"mode {fault.mode!r} does not corrupt an answer; expected one of: " + ", ".join(
            CORRUPT_MODES
        )
        yield Reference((*at, "mode"), msg, fault.mode)
    elif fault.mode in CORRUPT_MODES and fault.kind != "corrupt":
        msg = f"mode {fault.mode!r} applies only to kind 'corrupt', found kind {fault.kind!r}"
        yield Reference((*at, "mode"), msg, fault.mode)
    if fault.kind not in SILENT_KINDS:
        return
    spec = s.tools[tool]
    if spec.kind == "report_sink":
        msg = f"fault {fault.kind!r} cannot apply to a report_sink (its answer is a receipt)"
        yield Reference((*at, "kind"), msg, fault.kind)
    elif fault.kind == "wrong_entity":
        why = _no_other_entity(s, tool)
        if why is not None:
            msg = f"fault 'wrong_entity' needs another entity to answer for: {why}"
            yield Reference((*at, "kind"), msg, fault.kind)


def _no_other_entity(s: Scenario, tool: str) -> str | None:
    """Why tool `tool` has no other entity to answer for, or None when it has one (a
    Python tool's arguments are known once its code is imported: checked then,
    errorflow.scenario.checks.source_checks)."""
    spec = s.tools[tool]
    world = s.world
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
