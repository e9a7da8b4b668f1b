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
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from errorflow.bus.broker import EmbeddedBroker
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import apply, without_faults
from errorflow.scoring.score import Outcome
from errorflow.scoring.stats import paired_difference


@dataclass
class Arm:
    label: str
    scenario: Scenario


@dataclass
class ArmResult:
    label: str
    result: RunResult
    baseline: dict[str, float] | None = None

    @property
    def amplification(self) -> dict[str, float | None]:
        per = self.result.summary["metrics"]["per_trial"]
        out: dict[str, float | None] = {}
        for key in ("backend_calls", "model_calls"):
            base = (self.baseline or {}).get(key)
            out[key] = round(per[key] / base, 4) if base else None
        return out

    def to_json(self) -> dict[str, Any]:
        data = self.result.to_json()
        data["label"] = self.label
        data["baseline_per_trial"] = self.baseline
        data["amplification"] = self.amplification
        return data


@dataclass
class ExperimentResult:
    group_id: str
    arms: list[ArmResult]
    axes: list[str] = field(default_factory=list)

    def arm(self, label: str) -> ArmResult:
        return next(a for a in self.arms if a.label == label)

    def paired(self, a: str, b: str) -> dict[str, Any]:
        """Paired differences a − b on the same trials, for success and contamination."""
        sa, sb = self.arm(a).result.scores, self.arm(b).result.scores
        out = {}
        for name, outcome in (("success", Outcome.SUCCESS), ("contaminated", Outcome.CONTAMINATED)):
            out[name] = paired_difference(
                [s.outcome is outcome for s in sa], [s.outcome is outcome for s in sb]
            )
        return out


OnArm = Callable[[str, Scenario], None]


async def run_arms(
    arms: list[Arm],
    options: RunOptions,
    *,
    baseline: bool = True,
    group_id: str | None = None,
    on_arm: OnArm | None = None,
) -> ExperimentResult:
    group_id = group_id or f"{arms[0].scenario.name}-{uuid.uuid4().hex[:6]}"
    results: list[ArmResult] = []
    cache: dict[str, dict[str, float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        if options.bus is None and options.broker is None:
            broker = EmbeddedBroker()
            url = await broker.start()
            stack.push_async_callback(broker.stop)
            options = dataclasses.replace(options, broker=url)
        for arm in arms:
            if on_arm is not None:
                on_arm(arm.label, arm.scenario)
            run_options = dataclasses.replace(
                options,
                group_id=group_id,
                label=arm.label,
                run_id=f"{group_id}-{_slug(arm.label)}",
            )
            result = await run_scenario(arm.scenario, run_options)
            base = None
            if baseline:
                clean = without_faults(arm.scenario)
                key = clean.model_dump_json()
                if key not in cache:
                    if on_arm is not None:
                        on_arm(f"{arm.label} (fault-free baseline)", clean)
                    base_run = await run_scenario(
                        clean,
                        dataclasses.replace(
                            run_options,
                            label=f"{arm.label}:baseline",
                            run_id=f"{group_id}-{_slug(arm.label)}-baseline",
                        ),
                    )
                    cache[key] = base_run.summary["metrics"]["per_trial"]
                base = cache[key]
            results.append(ArmResult(arm.label, result, base))
    return ExperimentResult(group_id, results)


def propagation_arms(scenario: Scenario) -> list[Arm]:
    return [Arm(p, apply(scenario, {"propagation": p})) for p in ("explicit", "implicit")]


def sweep_arms(scenario: Scenario, axes: list[tuple[str, dict[str, dict[str, Any]]]]) -> list[Arm]:
    """One arm per cell of the axes' product, labelled `row/col`."""
    arms = []
    for combo in itertools.product(*(list(values.items()) for _, values in axes)):
        label = "/".join(lbl for lbl, _ in combo)
        overrides: dict[str, Any] = {}
        for _, ov in combo:
            overrides.update(ov)
        arms.append(Arm(label, apply(scenario, overrides)))
    return arms


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:40]
