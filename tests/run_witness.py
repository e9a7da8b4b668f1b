"""What a run really did, recorded beside errorflow's own records, for the invariants of
tests/test_generated_scenarios.py and bench/bench_generated_scenarios.py.

The witness hooks the two places where the facts are decided, not where they are
reported: a tool's fault plan (`FaultPlan.next`, as `ToolClient` builds it with
`plan_for`), so every injected fault that fired is counted by trial and by its place in
the scenario whatever the agents later say of it; and every circuit breaker's
admissions, releases and recorded outcomes, so a probe admitted half-open and never
given its verdict (nor given back) is seen at the end of the run. The checks compare
them with the run's stored events: an injected fault that fired and is missing from its
trial's events, or a breaker left half-open with a probe slot nobody will use, is a
violation.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from errorflow.faults.tool_base import FaultPlan, ToolFaultBase
from errorflow.policies.breaker import BreakerDecision, BreakerState, CircuitBreaker
from errorflow.scoring.fault_firing import fired_faults
from errorflow.world import tool_client


@dataclass
class _Probes:
    """One breaker's probes in its current half-open spell."""

    breaker: CircuitBreaker
    #: Probes admitted and neither recorded nor released.
    pending: int = 0


@dataclass
class Witness:
    #: (trial, fault place) -> times it fired, as the fault plans decided.
    fired: Counter[tuple[int, str]] = field(default_factory=Counter)
    #: Breakers by identity, with their pending probes.
    breakers: dict[int, _Probes] = field(default_factory=dict)
    #: Probes admitted half-open, over the run.
    probes: int = 0

    def stuck_breakers(self) -> list[str]:
        """Breakers that end the run half-open holding a probe slot nobody will use."""
        return [
            f"half-open with {p.pending} probe(s) never recorded nor released"
            for p in self.breakers.values()
            if p.breaker.state is BreakerState.HALF_OPEN and p.pending > 0
        ]

    def missing_faults(self, db: Path, run_id: str) -> list[str]:
        """Faults that fired (by the plans) more often than the trial's events say."""
        recorded: Counter[tuple[int, str]] = Counter()
        for trial, events in stored_events(db, run_id).items():
            for place, n in fired_faults(events).items():
                recorded[trial, place] += n
        return [
            f"trial {trial}: {place} fired {n} time(s), {recorded[trial, place]} in its events"
            for (trial, place), n in sorted(self.fired.items())
            if recorded[trial, place] != n
        ]


def stored_events(db: Path, run_id: str) -> dict[int, list[dict[str, Any]]]:
    """A run's event payloads from its store, by trial."""
    out: dict[int, list[dict[str, Any]]] = {}
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT trial, envelope FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        for trial, envelope in rows:
            out.setdefault(int(trial), []).append(json.loads(envelope).get("payload") or {})
    return out


@contextmanager
def witnessing() -> Iterator[Witness]:
    """Record what the fault plans and breakers do while the block runs (in-process)."""
    witness = Witness()
    with ExitStack() as stack:
        watched = _plans_watched(witness, tool_client.plan_for)
        stack.enter_context(mock.patch.object(tool_client, "plan_for", watched))
        for name, wrap in _breaker_hooks(witness).items():
            stack.enter_context(mock.patch.object(CircuitBreaker, name, wrap))
        yield witness


def _plans_watched(witness: Witness, plan_for: Any) -> Any:
    def watched(
        faults: Sequence[ToolFaultBase], stage: str, seed: int, trial: int, agent: str, tool: str
    ) -> tuple[FaultPlan, list[int]]:
        plan, places = plan_for(faults, stage, seed, trial, agent, tool)
        decide = plan.next

        def next_fault() -> ToolFaultBase | None:
            fault = decide()
            if fault is not None and plan.fired is not None:
                witness.fired[trial, f"tools.{tool}.faults[{places[plan.fired]}]"] += 1
            return fault

        plan.next = next_fault  # type: ignore[method-assign]
        return plan, places

    return watched


def _breaker_hooks(witness: Witness) -> dict[str, Any]:
    allow, release, record = (
        CircuitBreaker.allow,
        CircuitBreaker.release_permission,
        CircuitBreaker.record,
    )

    def probes(b: CircuitBreaker) -> _Probes:
        p = witness.breakers.setdefault(id(b), _Probes(b))
        if b.state is not BreakerState.HALF_OPEN:
            p.pending = 0  # a verdict or an expiry ends the spell and its probes
        return p

    def allow_w(self: CircuitBreaker, now: float) -> BreakerDecision:
        decision = allow(self, now)
        p = probes(self)
        if decision.reason == "probe":
            p.pending += 1
            witness.probes += 1
        return decision

    def release_w(self: CircuitBreaker) -> None:
        p = probes(self)
        release(self)
        p.pending = max(0, p.pending - 1)

    def record_w(self: CircuitBreaker, now: float, ok: bool, duration_s: float = 0.0) -> Any:
        p = probes(self)
        out = record(self, now, ok, duration_s)
        p.pending = max(0, p.pending - 1)
        probes(self)
        return out

    return {"allow": allow_w, "release_permission": release_w, "record": record_w}
