"""Which injected faults fired in a trial, and which configured ones never did.

A fault that did not fire is not evidence: a trial where a configured fault never fired
measured the fault-free path for it, and a summary must say so rather than count the
trial as surviving the fault. Every event that announces a fired fault names the
fault's place in the scenario in its `fault` field (`model_fault`: a model call's
attempt, `agent_crashed`: a crash), or, for the tool faults that fired on a call's
attempts, in the `faults` list of its `tool_call` (a silent wrong answer among them),
so counting needs only the trial's events. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from errorflow.scenario.spec.model import Scenario

#: The kinds of `agents.NAME.faults` whose firing is announced by an event with `fault`.
ANNOUNCED_AGENT_KINDS: frozenset[str] = frozenset({"crash"})


@dataclass(frozen=True)
class ConfiguredFault:
    #: The fault's place in the scenario (`agents.writer.model.faults[0]`).
    path: str
    kind: str
    #: The only trial it can fire in (a crash placed with `trial`), else None.
    trial: int | None = None

    def applies(self, trial: int) -> bool:
        return self.trial is None or self.trial == trial


def configured_faults(
    scenario: Scenario, agent_kinds: Collection[str] = ANNOUNCED_AGENT_KINDS
) -> list[ConfiguredFault]:
    """The scenario's tool faults, model faults and the agent faults of `agent_kinds`,
    in file order. (A per-trial tool fault, `bad_args`, fires for a trial, not on a
    call: no event announces it; errorflow.faults.tool_tally counts it from the
    scenario.)"""
    out: list[ConfiguredFault] = [
        ConfiguredFault(f"tools.{name}.faults[{i}]", fault.kind)
        for name, tool in scenario.tools.items()
        for i, fault in enumerate(tool.faults)
        if fault.stage != "trial"
    ]
    for name, agent in scenario.agents.items():
        for i, mf in enumerate(agent.model.faults):
            out.append(ConfiguredFault(f"agents.{name}.model.faults[{i}]", mf.kind))
        for i, fault in enumerate(agent.faults):
            kind = str(getattr(fault, "kind", ""))
            if kind in agent_kinds:
                placed = getattr(fault, "trial", None)
                trial = placed if isinstance(placed, int) else None
                out.append(ConfiguredFault(f"agents.{name}.faults[{i}]", kind, trial))
    return out


def fired_faults(events: Iterable[object]) -> Counter[str]:
    """How many times each fault fired, by path, from events (typed ones, or payloads
    as stored: a mapping with a `fault` string, or a `faults` list of them)."""
    fired: Counter[str] = Counter()
    for event in events:
        for name in ("fault", "faults"):
            value = event.get(name) if isinstance(event, Mapping) else getattr(event, name, None)
            for path in value if isinstance(value, list) else [value]:
                if isinstance(path, str) and path:
                    fired[path] += 1
    return fired


@dataclass(frozen=True)
class TrialFiring:
    trial: int
    fired: Counter[str]
    #: Configured faults that could fire in the trial and never did.
    never: tuple[str, ...]


def trial_firing(
    configured: Iterable[ConfiguredFault], trial: int, events: Iterable[object]
) -> TrialFiring:
    fired = fired_faults(events)
    never = tuple(f.path for f in configured if f.applies(trial) and not fired[f.path])
    return TrialFiring(trial, fired, never)


def unfired_trials(
    configured: Iterable[ConfiguredFault], events_by_trial: Mapping[int, Iterable[object]]
) -> dict[str, list[int]]:
    """For each configured fault, the trials (of `events_by_trial`) where it could fire
    and never did; a fault that fired in every such trial is left out."""
    faults = list(configured)
    out: dict[str, list[int]] = {}
    for trial in sorted(events_by_trial):
        for path in trial_firing(faults, trial, events_by_trial[trial]).never:
            out.setdefault(path, []).append(trial)
    return out
