"""Experiments of several runs: paired arms (`--propagation both`), sweeps, baselines.

All runs of an experiment share one broker (the embedded one is started once) and one
group id in the store. Arms run on the same seeds, so trial i of one arm is paired
with trial i of the other: same faults on the same calls, different handling.

Cost amplification is measured, not assumed: every arm is run a second time with all
injected faults removed (same seeds), and backend calls and model calls per trial are
divided by that baseline's (seed 000 §4 reports both axes; so do we).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from errorflow.bus.broker import EmbeddedBroker
from errorflow.core.errors import InputError
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.run_result import RunResult
from errorflow.runtime.workers import WorkerCount, Workers
from errorflow.scenario.overrides import apply, without_faults
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Reference, Scenario
from errorflow.scenario.spec.sweep_model import SweepMeasures
from errorflow.scoring.summary import (
    Amplification,
    OutcomeCounts,
    PairedOutcomes,
    PerTrialCosts,
    RunJson,
    amplification,
    paired_outcomes,
)
from errorflow.scoring.sweep_measures import MeasuresJson, success_counts, sweep_measures
from errorflow.store.readers import StoredRun, get_run, load_scores


class ArmJson(RunJson):
    """One arm as `--json` prints it: the run, its label, its fault-free baseline."""

    label: str
    baseline_per_trial: PerTrialCosts | None
    baseline_outcomes: NotRequired[OutcomeCounts | None]


class AxisJson(TypedDict):
    name: str
    values: list[str]  # the value labels, in order


#: The published figures of one sweep cell, as the scenario gives them.
RefCell = dict[str, float | int | str]


class ReferenceJson(TypedDict):
    """Published figures for the cells of a sweep (the scenario's `reference:`)."""

    source: str
    note: str
    cells: dict[str, RefCell]  # by cell label


class SweepJson(TypedDict):
    """A sweep as `errorflow sweep --json` prints it."""

    group_id: str
    scenario: str
    seed: int
    trials: int
    axes: list[AxisJson]
    cells: dict[str, ArmJson]  # by cell label, `row/col`
    reference: ReferenceJson | None
    wall_seconds: float
    #: Drop, recovered share, error amplification per cell (the sweep's `measures:`).
    measures: NotRequired[MeasuresJson]


#: A sweep's axes: name, and per value label the dotted-path overrides it applies.
Axes = Sequence[tuple[str, Mapping[str, Mapping[str, object]]]]


@dataclass
class Arm:
    """One run of an experiment: its label and its plan."""

    label: str
    plan: RunPlan

    @property
    def scenario(self) -> Scenario:
        return self.plan.scenario


@dataclass
class ArmResult:
    label: str
    result: RunResult
    baseline: PerTrialCosts | None = None
    #: Infra-fault trials of the fault-free baseline this arm ran (its costs leave them
    #: out; a baseline shared with an earlier arm counts there).
    baseline_infra_faults: int = 0
    #: The fault-free baseline's outcomes (with `baseline`).
    baseline_outcomes: OutcomeCounts | None = None

    @property
    def amplification(self) -> Amplification:
        return amplification(self.result.summary["metrics"]["per_trial"], self.baseline)

    def to_json(self) -> ArmJson:
        return {
            **self.result.to_json(),
            "label": self.label,
            "baseline_per_trial": self.baseline,
            "baseline_outcomes": self.baseline_outcomes,
            "amplification": self.amplification,
        }


@dataclass
class ExperimentResult:
    group_id: str
    arms: list[ArmResult]
    axes: list[str] = field(default_factory=list)

    def arm(self, label: str) -> ArmResult:
        for a in self.arms:
            if a.label == label:
                return a
        known = ", ".join(repr(a.label) for a in self.arms)
        raise InputError(f"no arm or cell {label!r} in this experiment: it has {known}")

    @property
    def infra_faults(self) -> int:
        """Trials of every run of the experiment (baselines included) the infrastructure
        failed: not scored, and a reason for the command to fail."""
        return sum(a.result.infra_faults + a.baseline_infra_faults for a in self.arms)

    @property
    def infra_reasons(self) -> list[str]:
        """The distinct reasons of the arms' infra-fault trials, in arm and trial order."""
        return list(dict.fromkeys(r for a in self.arms for r in a.result.infra_reasons))

    def paired(self, a: str, b: str) -> PairedOutcomes:
        """Paired differences a − b on the same trials, for success and contamination."""
        sa, sb = self.arm(a).result.scores, self.arm(b).result.scores
        return paired_outcomes([s.outcome for s in sa], [s.outcome for s in sb])

    def sweep_json(
        self,
        scenario: Scenario,
        axes: Axes,
        wall_seconds: float,
        measures: SweepMeasures | None = None,
    ) -> SweepJson:
        """The document `errorflow sweep --json` prints (and its tables read)."""
        data: SweepJson = {
            "group_id": self.group_id,
            "scenario": scenario.name,
            "seed": scenario.seed,
            "trials": scenario.trials,
            "axes": [{"name": name, "values": list(values)} for name, values in axes],
            "cells": {a.label: a.to_json() for a in self.arms},
            "reference": reference_json(scenario.reference),
            "wall_seconds": round(wall_seconds, 3),
        }
        if measures is not None:
            labels = [(name, list(values)) for name, values in axes]
            counts = {
                label: success_counts(c["outcomes"], c["trials"])
                for label, c in data["cells"].items()
            }
            ref = scenario.reference.cells if scenario.reference else None
            outcomes = {a.label: [s.outcome.value for s in a.result.scores] for a in self.arms}
            data["measures"] = sweep_measures(labels, measures, counts, ref, outcomes)
        return data


OnArm = Callable[[str, Scenario], None]


async def run_arms(
    arms: list[Arm],
    options: RunOptions,
    *,
    baseline: bool = True,
    group_id: str | None = None,
    on_arm: OnArm | None = None,
    workers: WorkerCount = 1,
    continuing: bool = False,
) -> ExperimentResult:
    """Each arm (and its baseline) in turn; `workers`: the processes each run's trials
    are spread over (errorflow.runtime.workers), kept for every run. `continuing`: the
    group was interrupted (`run --resume GROUP`): a run of it the store has finished is
    read back, one it has unfinished is resumed, and the rest run afresh."""
    group_id = group_id or f"{arms[0].scenario.name}-{uuid.uuid4().hex[:6]}"
    results: list[ArmResult] = []
    cache: dict[str, tuple[PerTrialCosts, OutcomeCounts]] = {}
    async with contextlib.AsyncExitStack() as stack:
        pool = stack.enter_context(Workers(workers))
        # The embedded broker only if some run is not split (split ones need none).
        one_process = any(pool.count_for(a.plan, options) <= 1 for a in arms)
        embedded = None
        if options.bus is None and options.broker is None and options.needs_broker and one_process:
            broker = EmbeddedBroker()
            embedded = await broker.start()
            stack.push_async_callback(broker.stop)

        async def run(plan: RunPlan, opts: RunOptions) -> RunResult:
            if continuing:
                assert opts.run_id is not None  # every run of a group is named
                stored = stored_run(opts.db_path, opts.run_id)
                if stored is not None and stored["status"] == "finished":
                    return finished_result(opts.db_path, stored)
                opts = dataclasses.replace(opts, resume=stored is not None)
            if embedded is not None and pool.count_for(plan, opts) <= 1:
                opts = dataclasses.replace(opts, broker=embedded)
            return await pool.run(plan, opts)

        for arm in arms:
            if on_arm is not None:
                on_arm(arm.label, arm.scenario)
            run_options = dataclasses.replace(
                options,
                group_id=group_id,
                label=arm.label,
                run_id=cell_run_id(group_id, arm.label),
            )
            result = await run(arm.plan, run_options)
            base, base_infra, base_outcomes = None, 0, None
            if baseline:
                clean = without_faults(arm.scenario)
                key = clean.model_dump_json()
                if key not in cache:
                    if on_arm is not None:
                        on_arm(f"{arm.label} (fault-free baseline)", clean)
                    base_run = await run(
                        RunPlan(clean),
                        dataclasses.replace(
                            run_options,
                            label=f"{arm.label}:baseline",
                            run_id=cell_run_id(group_id, arm.label, "-baseline"),
                        ),
                    )
                    cache[key] = (base_run.summary["metrics"]["per_trial"], base_run.outcomes)
                    base_infra = base_run.infra_faults  # counted once, by the arm that ran it
                base, base_outcomes = cache[key]
            results.append(ArmResult(arm.label, result, base, base_infra, base_outcomes))
    return ExperimentResult(group_id, results)


def stored_run(path: Path, run_id: str) -> StoredRun | None:
    """The run whose id is exactly `run_id`, if the store at `path` has it."""
    if not path.exists():
        return None
    run = get_run(path, run_id)
    return run if run is not None and run["run_id"] == run_id else None


def finished_result(path: Path, run: StoredRun) -> RunResult:
    """A finished run read back from the store: its summary and its trials' scores."""
    summary = run["summary"]
    assert summary is not None  # a finished run has one
    scores = load_scores(path, run["run_id"], include_bus_faults=True)
    return RunResult(
        run_id=run["run_id"],
        scenario=run["scenario"],
        seed=run["seed"],
        trials=run["trials"],
        propagation=run["propagation"],
        broker=run["broker"] or "",
        scores=[scores[t] for t in sorted(scores)],
        summary=summary,
        rejects=dict(run["rejects_by_reason"]),
        services=dict(summary.get("services", {})),
    )


def propagation_arms(scenario: Scenario) -> list[Arm]:
    return [Arm(p, RunPlan(apply(scenario, {"propagation": p}))) for p in ("explicit", "implicit")]


def sweep_arms(scenario: Scenario, axes: Axes, base_dir: Path | None = None) -> list[Arm]:
    """One arm per cell of the axes' product, labelled `v1/v2[/v3]` (a value per axis);
    a path a value names is read against `base_dir` (the scenario file's folder)."""
    arms = []
    for combo in itertools.product(*(list(values.items()) for _, values in axes)):
        label = "/".join(lbl for lbl, _ in combo)
        overrides: dict[str, object] = {}
        for _, ov in combo:
            overrides.update(ov)
        arms.append(Arm(label, RunPlan(apply(scenario, overrides, base_dir))))
    return arms


def reference_json(reference: Reference | None) -> ReferenceJson | None:
    if reference is None:
        return None
    return {"source": reference.source, "note": reference.note, "cells": reference.cells}


#: Longest run id of a sweep's cell: the bus derives trace ids from it (`RUN-t99999`,
#: `RUN-presence`) and an envelope's trace id has at most 64 characters.
MAX_CELL_RUN_ID = 52


def cell_run_id(group_id: str, label: str, suffix: str = "") -> str:
    """`GROUP-LABEL[-baseline]`, with the label cut (and a digest of the whole label
    added) when the id would pass MAX_CELL_RUN_ID."""
    slug = _slug(label)
    room = MAX_CELL_RUN_ID - len(group_id) - 1 - len(suffix)
    if len(slug) > room:
        digest = hashlib.sha256(label.encode()).hexdigest()[:6]
        slug = f"{slug[: max(1, room - 7)]}-{digest}"
    return f"{group_id}-{slug}{suffix}"


def _slug(label: str) -> str:
    """The label as a run id part; a long one (three axes make them) is cut with a
    digest of the whole, so two cells that share their first 40 characters differ."""
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    if len(slug) <= 40:
        return slug
    return f"{slug[:33]}-{hashlib.sha256(label.encode()).hexdigest()[:6]}"
