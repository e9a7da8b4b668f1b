"""One trial looked at whole: its outcome, its genealogy and its root cause (pure).

`errorflow trace` renders it, `--json` prints `to_json`, the Who&When and OpenTelemetry
exports are built from it, and a TUI can show it: everything comes from the rows the
store holds for the trial (errorflow.store.trial_store reads them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.task import TaskPayload
from errorflow.scoring.genealogy import genealogy
from errorflow.scoring.genealogy_types import Genealogy, StoredLabel
from errorflow.scoring.root_cause import RootCause, root_cause


@dataclass(frozen=True)
class TrialTrace:
    run_id: str
    scenario: str
    trial: int
    propagation: str
    outcome: str | None  # None: the trial was not scored (an interrupted run)
    depth: int
    reason: str
    task: str  # the prompt the runner gave
    needs: tuple[str, ...]
    genealogy: Genealogy
    root_cause: RootCause | None

    @property
    def failed(self) -> bool:
        return self.root_cause is not None


@dataclass(frozen=True)
class TrialOutcome:
    """A trial's stored outcome row (None when it was not scored)."""

    outcome: str
    depth: int
    reason: str


def trace_trial(
    *,
    run_id: str,
    scenario: str,
    trial: int,
    propagation: str,
    outcome: TrialOutcome | None,
    messages: Sequence[Envelope],
    events: Sequence[Envelope],
    labels: Mapping[str, StoredLabel],
) -> TrialTrace:
    g = genealogy(messages, events, labels, propagation)
    tasks = [m for m in messages if m.kind is Kind.TASK and m.sender == "runner"]
    task = TaskPayload.from_wire(tasks[0].payload) if tasks else TaskPayload("", ())
    cause = root_cause(g, outcome.outcome, outcome.depth) if outcome is not None else None
    return TrialTrace(
        run_id=run_id,
        scenario=scenario,
        trial=trial,
        propagation=propagation,
        outcome=outcome.outcome if outcome is not None else None,
        depth=outcome.depth if outcome is not None else 0,
        reason=outcome.reason if outcome is not None else "",
        task=task.prompt,
        needs=task.needs,
        genealogy=g,
        root_cause=cause,
    )


def to_json(trace: TrialTrace) -> dict[str, Any]:
    """Everything the trace shows, as plain data (`errorflow trace --json`)."""
    return asdict(trace)
