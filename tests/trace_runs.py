"""Helpers for the tests of trial traces: stored runs made in-process, hand-made trials."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from errorflow.agents.tool_gate import TraceEntry
from errorflow.bus.transport import InProcessBus
from errorflow.protocol.envelope import (
    Envelope,
    Kind,
    Status,
    WireError,
)
from errorflow.protocol.events import AgentEvent
from errorflow.runtime.runner import RunOptions, RunResult, run_plan
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import load
from errorflow.scenario.run_plan import RunPlan

#: The local traces of a run: (agent, trial) → one list of entries per invocation.
LocalTraces = dict[tuple[str, int], list[list[TraceEntry]]]


def run_stored(
    name: str, db: Path, *, trials: int | None = None, propagation: str | None = None
) -> tuple[RunResult, LocalTraces]:
    """Run a bundled scenario in-process into `db`; its result and every local trace."""
    traces: LocalTraces = defaultdict(list)

    def on_trace(agent: str, trial: int, entries: list[TraceEntry]) -> None:
        traces[(agent, trial)].append(list(entries))

    options = RunOptions(
        bus=InProcessBus(),
        db_path=db,
        on_trace=on_trace,
    )
    plan = RunPlan.of(load(resolve(name)), trials=trials, propagation=propagation)
    result = asyncio.run(run_plan(plan, options))
    return result, dict(traces)


class TrialBuilder:
    """Hand-made envelopes of one trial, each sender's seq counting up."""

    def __init__(self, run_id: str = "r", trial: int = 0) -> None:
        self.run_id, self.trial = run_id, trial
        self.seq: dict[str, int] = defaultdict(int)
        self.messages: list[Envelope] = []
        self.events: list[Envelope] = []

    def _env(self, sender: str, recipient: str, kind: Kind, **fields: Any) -> Envelope:
        self.seq[sender] += 1
        return Envelope(
            run_id=self.run_id,
            trial=self.trial,
            seq=self.seq[sender],
            sender=sender,
            recipient=recipient,
            kind=kind,
            trace_id=f"{self.run_id}-t{self.trial}",
            **fields,
        )

    def task(self, recipient: str, needs: Sequence[str] = ("papers",)) -> Envelope:
        env = self._env(
            "runner", recipient, Kind.TASK, payload={"prompt": "Do it.", "needs": list(needs)}
        )
        self.messages.append(env)
        return env

    def event(self, sender: str, event: AgentEvent) -> Envelope:
        env = self._env(sender, "observers", Kind.EVENT, payload=event.to_payload())
        self.events.append(env)
        return env

    def result(
        self,
        sender: str,
        recipient: str,
        parents: Sequence[Envelope],
        *,
        claims: Sequence[tuple[str, Any, bool]] = (),
        failures: Sequence[str] = (),
        status: Status = Status.OK,
        confidence: float = 1.0,
        errors: Sequence[WireError] = (),
        flags: Sequence[str] = (),
        unresolved: Sequence[str] = (),
    ) -> Envelope:
        answer = {
            "claims": [{"key": k, "value": v, "certain": c} for k, v, c in claims],
            "abstained": False,
            "flags": list(flags),
            "unresolved": list(unresolved),
            "text": "",
            "revise": [],
        }
        payload = {
            "role": sender,
            "round": 0,
            "answer": answer,
            "stopped": None,
            "trace": {"costs": {"sim_seconds": 0.5}, "failures": list(failures)},
        }
        env = self._env(
            sender,
            recipient,
            Kind.RESULT,
            payload=payload,
            status=status,
            confidence=confidence,
            errors=list(errors),
            derived_from=[p.id for p in parents],
        )
        self.messages.append(env)
        return env
