"""Partial credit: what the final answer did with each fact the task needs, and whether
a fault struck the trial at all.

A trial's outcome is one word for the whole answer; a team comparing two designs also
wants to know which facts went wrong. Per fact of the ground truth (a need, or one item
of a batch need), over the trial's final messages:

- right: some final message states it as certain and true, and none states it falsely;
- wrong: a final message states it as certain and false (the answer would mislead);
- abstained: no final message states it as certain (left open, hedged, or missing).

A success is `recovered` when a fault struck the trial (a sender reports a failure, or
an injected tool fault fired on an agent's calls, a silent one included) and the answer
came out whole and true all the same: the system repaired or routed around it. A success
no fault touched says nothing about resilience. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Protocol

from errorflow.faults.tool_base import withheld
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.result import ResultPayload
from errorflow.scenario.spec.model import Scenario


class Credit(StrEnum):
    RIGHT = "right"
    WRONG = "wrong"
    ABSTAINED = "abstained"


class _Truth(Protocol):
    @property
    def values(self) -> Mapping[str, object]: ...

    def is_true(self, key: str, value: object) -> bool: ...


def fact_credit(answers: Iterable[FinalAnswer], truth: _Truth) -> dict[str, Credit]:
    """Each fact of `truth`, judged over the final answers (see the module docstring)."""
    stated: dict[str, list[bool]] = {}
    for answer in answers:
        for claim in answer.claims:
            if claim.certain and claim.key in truth.values:
                stated.setdefault(claim.key, []).append(truth.is_true(claim.key, claim.value))
    out: dict[str, Credit] = {}
    for key in truth.values:
        verdicts = stated.get(key, [])
        if not verdicts:
            out[key] = Credit.ABSTAINED
        elif all(verdicts):
            out[key] = Credit.RIGHT
        else:
            out[key] = Credit.WRONG
    return out


def struck(scenario: Scenario, trial: int, results: Iterable[ResultPayload]) -> bool:
    """A fault struck the trial: a result (of `results`, its payloads) reports a failure,
    or a tool fault fired on its sender's calls (a silent wrong answer leaves no failure,
    only the firing), or a per-trial fault withheld a need's identifier from the task
    (`bad_args`)."""
    for need in scenario.task.needs:
        if withheld(scenario.tools[need.tool].faults, scenario.seed, trial, need.id) is not None:
            return True
    return any(p.failures or p.tool_faults or p.faults for p in results)


def credit_counts(
    trials: Iterable[Mapping[str, str]],
) -> dict[str, dict[str, int]]:
    """Per fact, how many trials got it right, wrong or abstained (facts in the order
    first seen)."""
    out: dict[str, dict[str, int]] = {}
    for credit in trials:
        add_credit(out, credit)
    return out


def add_credit(counts: dict[str, dict[str, int]], credit: Mapping[str, str]) -> None:
    """One trial's credit added to `counts` (as `credit_counts` makes them)."""
    for key, verdict in credit.items():
        fact = counts.setdefault(key, {c.value: 0 for c in Credit})
        fact[verdict] = fact.get(verdict, 0) + 1
