"""A small Python API for notebooks and scripts: load, override, run, read the results.

    from errorflow import api

    scenario = api.load("support-pipeline")            # a bundled name, a path or a dict
    scenario = api.override(scenario, {"trials": 30})  # dotted paths, as `--set` takes
    result = api.run(scenario, propagation="implicit") # in-process; broker="mqtt://..."
    result.records()                                   # one plain dict per trial
    result.to_pandas()                                 # the same, as a DataFrame
    result.trace(3)                                    # one trial's genealogy, root cause
    print(result.report())                             # what `errorflow run` prints
    api.run(scenario, propagation="both")              # both arms, paired (`Paired`)
    api.baseline(scenario)                             # the fault-free run
    api.sweep(scenario, {"agents.writer.model.profile": ["weak", "frontier"]})

Everything goes through the same validation as the CLI (a bad dict raises
`ScenarioError` with one problem per line), the same runner and the same scorer; only
the bus defaults to an in-process one, and the store to a temporary file, so a
notebook needs no broker and leaves nothing behind unless `db=` names a file. That
temporary store lives as long as the result that holds it (`result.db`): traces and
records read from it until the result is garbage-collected, then it is deleted.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import tempfile
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from rich.console import Console

from errorflow.bus.transport import InProcessBus
from errorflow.bus.url import parse_broker_url
from errorflow.core.display import signed_pct
from errorflow.core.errors import InputError
from errorflow.reports.tables import print_run
from errorflow.runtime import workers as worker_processes
from errorflow.runtime.experiment import Arm, ExperimentResult, SweepJson, run_arms, sweep_arms
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.run_result import RunResult
from errorflow.runtime.workers import WorkerCount
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import ScenarioError, validate_data
from errorflow.scenario.loader import load as load_file
from errorflow.scenario.overrides import apply, without_faults
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.sweep_model import MAX_SWEEP_AXES
from errorflow.scoring.score import TrialScore
from errorflow.scoring.summary import UNCOSTED, PairedOutcomes, RunSummary, paired_outcomes
from errorflow.scoring.trial_trace import TrialTrace
from errorflow.store.trial_findings import trial_findings
from errorflow.store.trial_store import load_trace, telling_trial

__all__ = [
    "Paired",
    "Result",
    "Scenario",
    "ScenarioError",
    "Sweep",
    "TrialTrace",
    "baseline",
    "load",
    "override",
    "run",
    "run_async",
    "sweep",
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


class NoSuchTrial(InputError, KeyError):
    """`Result.trace(n)` of a trial the run does not have."""


@dataclass
class Result:
    """One run: per-trial records, the summary the CLI prints, the run's raw result,
    and the store it was written to (`db`; a temporary one is deleted with the result)."""

    raw: RunResult
    db: Path
    _keep: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

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
        """One flat dict per trial (ready for `pandas.DataFrame(result.records())`): the
        outcome and costs, each agent's label (`labels`), the root cause's first origin
        (`origin`: agent, kind, tool, code; None when the trial did not fail; the costs
        None for a trial a bus or infra fault ended: its results never arrived), the
        edges contamination crossed (`edges`, `a->b`) and how often each injected
        fault fired (`fired_faults`, by its path in the scenario)."""
        found = trial_findings(self.db, self.run_id)
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
            costs: dict[str, float | None] = dict(score.costs.to_wire())
            if score.outcome in UNCOSTED:  # counted from results that never arrived
                costs = dict.fromkeys(costs)
            row.update(costs)
            row["contaminated_agents"] = sorted(
                {lb.sender for lb in score.labels if lb.label.value == "contaminated"}
            )
            row["labels"] = _agent_labels(score)
            f = found.get(score.trial)
            row["origin"] = f.origin if f else None
            row["edges"] = list(f.edges) if f else []
            row["fired_faults"] = f.fired if f else {}
            out.append(row)
        return out

    def trace(self, trial: int | None = None) -> TrialTrace:
        """One trial traced from the store: its messages' genealogy and root cause
        (default: the trial worth looking at first, as `errorflow trace` picks it)."""
        if trial is None:
            trial = telling_trial(self.db, self.run_id)
        traced = load_trace(self.db, self.run_id, trial) if trial is not None else None
        if traced is None:
            raise NoSuchTrial(f"run {self.run_id} has no trial {trial}")
        return traced

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
            f"implicit {im}, difference {signed_pct(d['diff'])} "
            f"(95% CI {signed_pct(d['low'])} to {signed_pct(d['high'])})>"
        )


#: One varied field: its dotted path and, by value label, the override of that value.
Axis = tuple[str, Mapping[str, Mapping[str, object]]]


@dataclass
class Sweep:
    """`sweep(...)`: a `Result` per cell (labelled `v1/v2[/v3]`, a value per axis), each
    cell's fault-free baseline outcomes, and paired differences between cells (they
    share seeds and faults)."""

    scenario: Scenario
    axes: list[Axis]
    raw: ExperimentResult
    cells: dict[str, Result]

    @property
    def group_id(self) -> str:
        return self.raw.group_id

    @property
    def baselines(self) -> dict[str, dict[str, int] | None]:
        """Each cell's fault-free baseline outcomes (None: run with `baseline=False`)."""
        return {a.label: _counts(a.baseline_outcomes) for a in self.raw.arms}

    def paired(self, a: str, b: str) -> PairedOutcomes:
        """Cell a − cell b on the same trials, for success and contamination."""
        return self.raw.paired(a, b)

    def records(self) -> list[dict[str, object]]:
        """Every cell's records, each with its `cell` label and a column per axis."""
        names = [name for name, _ in self.axes]
        rows: list[dict[str, object]] = []
        for combo in itertools.product(*(list(values) for _, values in self.axes)):
            label = "/".join(combo)
            values = dict(zip(names, combo, strict=True))
            rows += [{"cell": label, **r, **values} for r in self.cells[label].records()]
        return rows

    def to_pandas(self) -> Any:
        return _frame(self.records())

    def to_json(self) -> SweepJson:
        """The document `errorflow sweep --json` prints."""
        return self.raw.sweep_json(self.scenario, self.axes, 0.0)

    def __repr__(self) -> str:
        names = " × ".join(name for name, _ in self.axes)
        return f"<Sweep {self.group_id}: {names}, {len(self.cells)} cells>"


def _counts(outcomes: Mapping[str, int] | None) -> dict[str, int] | None:
    return dict(outcomes) if outcomes is not None else None


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
    workers: WorkerCount = 1,
) -> Result:
    """Run a scenario (in-process unless `broker` names one: `mqtt://host:port`, or
    `embedded` for the built-in broker) and score every trial; `workers`: spread the
    trials over that many processes (`"auto"`: every core for a large run), with the
    outcomes one process gives (they are spawned: a script that uses them runs its work
    under `if __name__ == "__main__":`)."""
    plan = RunPlan.of(scenario, trials=trials, seed=seed, propagation=propagation)
    return await _run_plan(plan, broker=broker, db=db, workers=workers)


async def _run_plan(
    plan: RunPlan, *, broker: str | None, db: str | Path | None, workers: WorkerCount
) -> Result:
    store = _Store(db)
    raw = await worker_processes.run(plan, store.options(broker), workers)
    return Result(raw, store.path, store.keep)


@dataclass
class _Store:
    """Where a run's store goes: the file `db` names, else a temporary directory that
    the result keeps (deleted when the result is garbage-collected)."""

    db: str | Path | None
    keep: tempfile.TemporaryDirectory[str] | None = None

    def __post_init__(self) -> None:
        if self.db is None:
            self.keep = tempfile.TemporaryDirectory(prefix="errorflow-")

    @property
    def path(self) -> Path:
        return Path(self.keep.name) / "errorflow.db" if self.keep else Path(str(self.db))

    def options(self, broker: str | None) -> RunOptions:
        return RunOptions(
            db_path=self.path,
            bus=InProcessBus() if broker is None else None,
            broker=parse_broker_url(broker) if broker not in (None, "embedded") else None,
        )


@overload
def run(
    scenario: Scenario,
    *,
    trials: int | None = ...,
    seed: int | None = ...,
    propagation: Literal["both"],
    broker: str | None = ...,
    db: str | Path | None = ...,
    workers: WorkerCount = ...,
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
    workers: WorkerCount = ...,
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
    workers: WorkerCount = ...,
) -> Result | Paired: ...
def run(
    scenario: Scenario,
    *,
    trials: int | None = None,
    seed: int | None = None,
    propagation: str | None = None,
    broker: str | None = None,
    db: str | Path | None = None,
    workers: WorkerCount = 1,
) -> Result | Paired:
    """Run a scenario and score every trial, from code that is not async (a script, or a
    notebook cell: a running event loop is left alone, the run gets a loop of its own in
    a thread). `propagation`: `explicit`, `implicit` (default: the scenario's), or `both`
    (a `Paired` result: the two arms on the same seeds). `broker`: in-process unless it
    names one (`mqtt://host:port`, or `embedded` for the built-in broker). `db`: a SQLite
    file to keep the runs in (default: a temporary one). `workers`: spread the trials
    over that many processes (`"auto"`: every core), with the outcomes one process gives
    (a script that uses them runs its work under `if __name__ == "__main__":`)."""
    if propagation == "both":
        return _sync(_paired(scenario, trials, seed, broker, db, workers))
    options: dict[str, Any] = {
        "trials": trials, "seed": seed, "broker": broker, "db": db, "workers": workers
    }  # fmt: skip
    return _sync(run_async(scenario, propagation=propagation, **options))


_ARMS = ("explicit", "implicit")


async def _paired(
    scenario: Scenario,
    trials: int | None,
    seed: int | None,
    broker: str | None,
    db: str | Path | None,
    workers: WorkerCount,
) -> Paired:
    """The two arms as one group of the store, as `errorflow run --propagation both`
    makes them (`errorflow report GROUP` then pairs them)."""
    arms = [Arm(p, RunPlan.of(scenario, trials=trials, seed=seed, propagation=p)) for p in _ARMS]
    store = _Store(db)
    both = await run_arms(arms, store.options(broker), baseline=False, workers=workers)
    explicit, implicit = (Result(both.arm(p).result, store.path, store.keep) for p in _ARMS)
    return Paired(explicit, implicit)


def baseline(
    scenario: Scenario,
    *,
    trials: int | None = None,
    seed: int | None = None,
    propagation: Literal["explicit", "implicit"] | None = None,
    broker: str | None = None,
    db: str | Path | None = None,
    workers: WorkerCount = 1,
) -> Result:
    """The scenario run with every injected fault removed (the cost baseline that
    `errorflow run --baseline` compares against), on the same seeds; the keywords are
    `run`'s."""
    plan = RunPlan.of(scenario, trials=trials, seed=seed, propagation=propagation)
    clean = RunPlan(without_faults(plan.scenario))
    return _sync(_run_plan(clean, broker=broker, db=db, workers=workers))


def sweep(
    scenario: Scenario,
    vary: Mapping[str, Sequence[object]],
    *,
    trials: int | None = None,
    seed: int | None = None,
    baseline: bool = True,
    broker: str | None = None,
    db: str | Path | None = None,
    workers: WorkerCount = 1,
) -> Sweep:
    """Run every combination of up to three varied fields (`{"propagation": ["explicit",
    "implicit"], "agents.writer.model.profile": ["weak", "frontier"]}`: dotted paths, as
    `errorflow sweep --vary` takes them), each cell on the same seeds, with its
    fault-free baseline unless `baseline=False`; the other keywords are `run`'s."""
    axes = _axes_of(vary)
    arms = [
        Arm(a.label, RunPlan.of(a.scenario, trials=trials, seed=seed))
        for a in sweep_arms(scenario, axes)
    ]
    store = _Store(db)

    async def work() -> ExperimentResult:
        return await run_arms(arms, store.options(broker), baseline=baseline, workers=workers)

    result = _sync(work())
    cells = {a.label: Result(a.result, store.path, store.keep) for a in result.arms}
    return Sweep(scenario, axes, result, cells)


def _axes_of(vary: Mapping[str, Sequence[object]]) -> list[Axis]:
    if not 1 <= len(vary) <= MAX_SWEEP_AXES:
        raise InputError(f"a sweep varies 1 to {MAX_SWEEP_AXES} fields, not {len(vary)}")
    axes: list[Axis] = []
    for path, values in vary.items():
        if isinstance(values, str) or not values:
            raise InputError(f"{path}: give a list of values to vary, not {values!r}")
        cells = {_label(v): {path: v} for v in values}
        if len(cells) < len(values):
            raise InputError(f"{path}: a value is given twice in {list(values)!r}")
        axes.append((path, cells))
    return axes


def _label(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


T = TypeVar("T")


def _sync(work: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


load = load_scenario  # the name the examples use: `api.load(...)`
