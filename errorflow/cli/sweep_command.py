"""`errorflow sweep`: vary one or two scenario fields and print the matrix."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Mapping

from errorflow.cli.args import EXIT_OK, UsageError
from errorflow.cli.console import out
from errorflow.cli.run_commands import (
    Bars,
    configured,
    progress_bars,
    run_options,
    scenario_options,
)
from errorflow.reports.tables import sweep_tables
from errorflow.runtime.experiment import (
    Arm,
    run_arms,
    sweep_arms,
)
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import parse_value, with_settings

#: One axis of a sweep: its name and, by value label, the overrides of that value.
Axis = tuple[str, Mapping[str, Mapping[str, object]]]


def cmd_sweep(args: argparse.Namespace) -> int:
    scenario = configured(args)
    axes = _axes(args, scenario)
    # `--trials` and `--seed` win over a cell's own (`--vary trials=5,10 --trials 3` runs
    # 3 trials a cell), so they are applied again to every cell; `--propagation` is a
    # default a cell may vary.
    arms = [
        Arm(a.label, with_settings(a.scenario, trials=args.trials, seed=args.seed))
        for a in sweep_arms(scenario, axes)
    ]
    with progress_bars(args) as progress:
        bars = Bars(progress)
        started = time.perf_counter()
        result = asyncio.run(
            run_arms(
                arms, run_options(args, bars), baseline=not args.no_baseline, on_arm=bars.start
            )
        )
        wall = time.perf_counter() - started
    data = result.sweep_json(scenario, axes, wall)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        out.print(sweep_tables(data))
        out.print(
            f"group {result.group_id}; wall time {wall:.2f}s; "
            f"`errorflow report {result.group_id}` writes the full report",
            highlight=False,
        )
    return EXIT_OK


def _axes(args: argparse.Namespace, scenario: Scenario) -> list[Axis]:
    """The axes `--vary` gives, or else the scenario's `sweep:` block."""
    axes: list[Axis] = []
    for spec in args.vary or []:
        path, sep, values = spec.partition("=")
        if not sep or not values:
            raise UsageError(f"--vary wants PATH=V1,V2,...; got {spec!r}")
        axes.append((path, {v: {path: parse_value(v)} for v in values.split(",")}))
    if not axes:
        if scenario.sweep is None:
            raise UsageError(f"{args.scenario} has no sweep: block; give --vary PATH=V1,V2")
        axes = [(a.name, a.values) for a in scenario.sweep.axes]
    if len(axes) > 2:
        raise UsageError("a sweep varies one or two fields")
    return axes


def add_sweep(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    w = sub.add_parser(
        "sweep",
        help="vary one or two scenario fields and print the matrix",
        description="Run every combination of the values of one or two scenario fields "
        "(the scenario's sweep: block, or --vary), each against its fault-free baseline, "
        "and print the matrix.",
    )
    w.add_argument("scenario")
    w.add_argument(
        "--vary",
        action="append",
        metavar="PATH=V1,V2",
        help="a dotted field path and its values, e.g. "
        "agents.researcher.policy.strategy=blind-retry,classify (repeat for a second axis)",
    )
    scenario_options(w, ["explicit", "implicit"], "per cell")
    w.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the fault-free baseline runs (no amplification figures)",
    )
    w.set_defaults(func=cmd_sweep)
