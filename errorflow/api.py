"""A small Python API for notebooks and scripts: load, override, run, read the results.

    from errorflow import api

    scenario = api.load("support-pipeline")            # a bundled name, a path or a dict
    scenario = api.override(scenario, {"trials": 30})  # dotted paths, as `--set` takes
    result = api.run(scenario, propagation="implicit") # in-process; broker="mqtt://..."
    result.records()                                   # one plain dict per trial
    print(result.report())                             # what `errorflow run` prints

Everything goes through the same validation as the CLI (a bad dict raises
`ScenarioError` with one problem per line), the same runner and the same scorer; only
the bus defaults to an in-process one, and the store to a temporary file, so a
notebook needs no broker and leaves nothing behind unless `db=` names a file.
"""

from __future__ import annotations

import asyncio
import io
import tempfile
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

from rich.console import Console

from errorflow.bus.transport import InProcessBus
from errorflow.bus.url import parse_broker_url
from errorflow.reports.tables import print_run
from errorflow.runtime import workers as worker_processes
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.run_result import RunResult
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import ScenarioError, validate_data
from errorflow.scenario.loader import load as load_file
from errorflow.scenario.overrides import apply
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import TrialScore
from errorflow.scoring.summary import PairedOutcomes, RunSummary, paired_outcomes

__all__ = [
    "Paired",
    "Result",
    "Scenario",
    "ScenarioError",
    "load",
    "override",
    "run",
    "run_async",
]


def load_scenario(source: str | Path | Mapping[str, Any]) -> Scenario:
    """A scenario from a bundled name, a file path or a plain dict (validated as a
    file would be)."""
    if isinstance(source, Mapping):
        return validate_data(dict(source), "<dict>")
    return load_file(resolve(str(source)))


def override(scenario: Scenario, settings: Mapping[str, object]) -> Scenario:
    """The scenario with dotted-path fields replaced (`{"agents.writer.model.profile":
    "frontier"}`), validated again."""
    return apply(scenario, settings)


@dataclass
class Result:
    """One run: per-trial records, the summary the CLI prints, the run's raw result."""

    raw: RunResult

    @property
    def run_id(self) -> str:
        return self.raw.run_id

    @property
    def summary(self) -> RunSummary:
        return self.raw.summary

    @property
    def outcomes(self) -> dict[str, int]:
        return self.raw.outcomes

    def records(self) -> list[dict[str, object]]:
        """One flat dict per trial (ready for `pandas.DataFrame(result.records())`)."""
        out: list[dict[str, object]] = []
        for score in sorted(self.raw.scores, key=lambda s: s.trial):
            row: dict[str, object] = {
                "run_id": self.raw.run_id,
                "scenario": self.raw.scenario,
                "propagation": self.raw.propagation,
                "seed": self.raw.seed,
                "trial": score.trial,
                "outcome": score.outcome.value,
                "depth": score.depth,
                "reason": score.reason,
            }
            row.update(score.costs.to_wire())
            row["contaminated_agents"] = sorted(
                {lb.sender for lb in score.labels if lb.label.value == "contaminated"}
            )
            row["labels"] = _agent_labels(score)
            out.append(row)
        return out

    def report(self, width: int = 100) -> str:
        """The text `errorflow run` prints for this run."""
        console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
        print_run(console, self.raw.to_json())
        return console.export_text()

    def to_pandas(self) -> Any:
        """`records()` as a pandas DataFrame, a row per trial (`pip install
        'errorflow[pandas]'`)."""
        return _frame(self.records())

    def __repr__(self) -> str:
        o = self.outcomes
        return (
            f"<Result {self.run_id}: {self.raw.propagation}, {self.raw.trials} trials, "
            f"success {o.get('success', 0)}, contained {o.get('contained', 0)}, "
            f"contaminated {o.get('contaminated', 0)}>"
        )


@dataclass
class Paired:
    """`run(..., propagation="both")`: the two arms on the same seeds and faults, and
    their paired differences (success and contamination; Newcombe's interval and the
    exact McNemar test, as `errorflow run --propagation both` prints them)."""

    explicit: Result
    implicit: Result

    @property
    def paired(self) -> PairedOutcomes:
        def by_trial(r: Result) -> list[str]:
            return [s.outcome.value for s in sorted(r.raw.scores, key=lambda s: s.trial)]

        return paired_outcomes(by_trial(self.explicit), by_trial(self.implicit))

    def records(self) -> list[dict[str, object]]:
        """Both arms' records (their `propagation` tells them apart)."""
        return self.explicit.records() + self.implicit.records()

    def to_pandas(self) -> Any:
        return _frame(self.records())

    def __repr__(self) -> str:
        d = self.paired["contaminated"]
        ex, im = (r.outcomes.get("contaminated", 0) for r in (self.explicit, self.implicit))
        return (
            f"<Paired {self.explicit.raw.trials} trials: contaminated explicit {ex} vs "
            f"implicit {im}, difference {d['diff']:+.0%} "
            f"(95% CI {d['low']:+.0%} to {d['high']:+.0%})>"
        )


def _agent_labels(score: TrialScore) -> dict[str, str]:
    """Each agent's worst label in the trial (contaminated > contained > clean)."""
    rank = {"clean": 0, "contained": 1, "contaminated": 2}
    out: dict[str, str] = {}
    for lb in score.labels:
        if rank[lb.label.value] >= rank.get(out.get(lb.sender, "clean"), 0):
            out[lb.sender] = lb.label.value
    return dict(sorted(out.items()))


def _frame(rows: list[dict[str, object]]) -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas() needs pandas: pip install 'errorflow[pandas]'") from None
    return pd.DataFrame(rows)


async def run_async(
    scenario: Scenario,
    *,
    trials: int | None = None,
    seed: int | None = None,
    propagation: str | None = None,
    broker: str | None = None,
    db: str | Path | None = None,
    workers: worker_processes.WorkerCount = 1,
) -> Result:
    """Run a scenario (in-process unless `broker` names one: `mqtt://host:port`, or
    `embedded` for the built-in broker) and score every trial; `workers`: spread the
    trials over that many processes (`"auto"`: every core for a large run), with the
    outcomes one process gives (they are spawned: a script that uses them runs its work
    under `if __name__ == "__main__":`)."""
    with tempfile.TemporaryDirectory(prefix="errorflow-") as tmp:
        plan = RunPlan.of(scenario, trials=trials, seed=seed, propagation=propagation)
        options = RunOptions(
            db_path=Path(db) if db is not None else Path(tmp) / "errorflow.db",
            bus=InProcessBus() if broker is None else None,
            broker=parse_broker_url(broker) if broker not in (None, "embedded") else None,
        )
        return Result(await worker_processes.run(plan, options, workers))


@overload
def run(
    scenario: Scenario,
    *,
    trials: int | None = ...,
    seed: int | None = ...,
    propagation: Literal["both"],
    broker: str | None = ...,
    db: str | Path | None = ...,
    workers: worker_processes.WorkerCount = ...,
) -> Paired: ...
@overload
def run(
    scenario: Scenario,
    *,
    trials: int | None = ...,
    seed: int | None = ...,
    propagation: Literal["explicit", "implicit"] | None = ...,
    broker: str | None = ...,
    db: str | Path | None = ...,
    workers: worker_processes.WorkerCount = ...,
) -> Result: ...
@overload
def run(
    scenario: Scenario,
    *,
    trials: int | None = ...,
    seed: int | None = ...,
    propagation: str | None = ...,
    broker: str | None = ...,
    db: str | Path | None = ...,
    workers: worker_processes.WorkerCount = ...,
) -> Result | Paired: ...
def run(
    scenario: Scenario,
    *,
    trials: int | None = None,
    seed: int | None = None,
    propagation: str | None = None,
    broker: str | None = None,
    db: str | Path | None = None,
    workers: worker_processes.WorkerCount = 1,
) -> Result | Paired:
    """Run a scenario and score every trial, from code that is not async (a script, or a
    notebook cell: a running event loop is left alone, the run gets a loop of its own in
    a thread). `propagation`: `explicit`, `implicit` (default: the scenario's), or `both`
    (a `Paired` result: the two arms on the same seeds). `broker`: in-process unless it
    names one (`mqtt://host:port`, or `embedded` for the built-in broker). `db`: a SQLite
    file to keep the runs in (default: a temporary one). `workers`: spread the trials
    over that many processes (`"auto"`: every core), with the outcomes one process gives
    (a script that uses them runs its work under `if __name__ == "__main__":`)."""
    options: dict[str, Any] = {
        "trials": trials, "seed": seed, "broker": broker, "db": db, "workers": workers
    }  # fmt: skip
    if propagation == "both":
        arms = [_sync(run_async(scenario, propagation=p, **options)) for p in _ARMS]
        return Paired(*arms)
    return _sync(run_async(scenario, propagation=propagation, **options))


_ARMS = ("explicit", "implicit")


def _sync(work: Coroutine[Any, Any, Result]) -> Result:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


load = load_scenario  # the name the examples use: `api.load(...)`
