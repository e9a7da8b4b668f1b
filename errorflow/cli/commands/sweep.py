"""`errorflow sweep`: vary up to three scenario fields and print the matrix, and the
derived measures the scenario's `sweep.measures` declares."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Mapping

from pydantic import ValidationError
from rich.console import Group
from rich.table import Table
from rich.text import Text

from errorflow.cli.command_table import summary
from errorflow.cli.commands.run import new_group_id, refuse_infra_faults, resume_on_failure
from errorflow.cli.console import out
from errorflow.cli.errors import EXIT_OK, UsageError
from errorflow.cli.errors import shown as quoted
from errorflow.cli.paths import path_arg
from errorflow.cli.preflight import broker_of, writable_db
from errorflow.cli.progress import Bars, progress_bars, wanted
from errorflow.cli.run_options import (
    check_workers,
    requested_workers,
    run_options,
    scenario_of,
    scenario_options,
    workers_option,
)
from errorflow.cli.scenario_input import check_axis, checked_path, folder_of, read
from errorflow.cli.spend import check_spend, print_traffic, traffic_doc
from errorflow.core.errors import clipped
from errorflow.reports.profile_lines import profile_lines
from errorflow.reports.sweep_measure_table import measure_table
from errorflow.reports.tables import measured_trials, shown, sweep_tables
from errorflow.runtime.experiment import (
    Arm,
    ArmJson,
    SweepJson,
    run_arms,
    sweep_arms,
)
from errorflow.scenario.checks.explain import problems_from
from errorflow.scenario.marked_yaml import ValueBudget
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.sweep_model import MAX_SWEEP_AXES, SweepAxis, SweepMeasures

#: One axis of a sweep: its name and, by value label, the overrides of that value.
Axis = tuple[str, Mapping[str, Mapping[str, object]]]


def cmd_sweep(args: argparse.Namespace) -> int:
    scenario = scenario_of(args)
    axes = _axes(args, scenario)
    # `--trials` and `--seed` win over a cell's own (`--vary trials=5,10 --trials 3` runs
    # 3 trials a cell), so they are applied again to every cell; `--propagation` is a
    # default a cell may vary.
    arms = [
        Arm(a.label, RunPlan.of(a.scenario, trials=args.trials, seed=args.seed))
        for a in sweep_arms(scenario, axes, folder_of(args.scenario))
    ]
    if check_spend(args, arms, not args.no_baseline):
        return EXIT_OK  # --dry-run: the estimate is printed, nothing ran
    check_workers(args, [a.scenario for a in arms])
    writable_db(args.db)
    broker_of(args.broker)  # malformed: bad input now; down: fails before a run is stored
    group_id = new_group_id(scenario)
    with progress_bars(args) as progress, resume_on_failure(args.db, [], group_id):
        bars = Bars(progress, [a.label for a in arms], unit="cell", log=wanted(args))
        started = time.perf_counter()
        result = asyncio.run(
            run_arms(
                arms,
                run_options(args, bars),
                baseline=not args.no_baseline,
                group_id=group_id,
                on_arm=bars.start,
                workers=requested_workers(args),
            )
        )
        wall = time.perf_counter() - started
    data = result.sweep_json(scenario, axes, wall, _measures(args, scenario))
    if args.json:
        print(json.dumps({**data, **traffic_doc(args)}, indent=2))
        refuse_infra_faults(result.infra_faults, result.infra_reasons)
        return EXIT_OK
    out.print(sweep_tables(data))
    if len(axes) == 2 and not args.no_baseline:
        out.print(amplification_matrix(data))
    if "measures" in data:
        out.print(sweep_measures_table(data))
    # Every profile a cell used (a sweep may vary them), each once.
    for line in dict.fromkeys(line for a in arms for line in profile_lines(a.scenario)):
        out.print(Text(line), highlight=False)
    out.print(
        f"group {shown(result.group_id)}; wall time {wall:.2f}s; "
        f"`errorflow report {shown(result.group_id)}` writes the full report",
        highlight=False,
    )
    print_traffic(args)
    refuse_infra_faults(result.infra_faults, result.infra_reasons)
    return EXIT_OK


def _axes(args: argparse.Namespace, scenario: Scenario) -> list[Axis]:
    """The axes `--vary` gives, or else the scenario's `sweep:` block; every value is
    checked against the scenario (with its `--set` overrides) before anything runs."""
    axes: list[Axis] = []
    budget = ValueBudget()
    for spec in args.vary or []:
        path, sep, values = spec.partition("=")
        if not sep or not values or not path:
            raise UsageError(f"expected PATH=V1,V2,..., found {quoted(spec)}", where="--vary")
        option = f"--vary {spec}"
        labels = values.split(",")
        _as_an_axis(labels, option)
        twice = sorted({v for v in labels if labels.count(v) > 1})
        if twice:
            raise UsageError(f"{quoted(twice[0])} is given twice", where=clipped(option))
        name = checked_path(path, option)
        if any(name == other for other, _ in axes):
            raise UsageError(f"{name} is varied twice: give its values once", where="--vary")
        axes.append((name, {v: {path: read(v, option, budget)} for v in labels}))
    where = "--vary"
    if not axes:
        if scenario.sweep is None:
            raise UsageError("has no sweep: block; expected --vary PATH=V1,V2", where=args.scenario)
        axes = [(a.name, a.values) for a in scenario.sweep.axes]
        where = "sweep:"
    if len(axes) > MAX_SWEEP_AXES:
        raise UsageError(
            f"expected one to {MAX_SWEEP_AXES} fields to vary, found {len(axes)}", where=where
        )
    for name, values in axes:
        check_axis(scenario, f"{where} {name}", values, folder_of(args.scenario))
    return axes


def _as_an_axis(labels: list[str], option: str) -> None:
    """As many values as an axis of a `sweep:` block may have (its model's limit)."""
    try:
        SweepAxis.model_validate({"name": "vary", "values": {v: {} for v in labels}})
    except ValidationError as exc:
        problem = problems_from(exc, {"values": labels}, {}, SweepAxis)[0]
        raise UsageError(problem.message, where=clipped(option), path=problem.path) from None


def _measures(args: argparse.Namespace, scenario: Scenario) -> SweepMeasures | None:
    """The scenario's measures, for its own axes only (`--vary` axes are others)."""
    if args.vary or scenario.sweep is None:
        return None
    return scenario.sweep.measures


def sweep_measures_table(data: SweepJson) -> Group:
    """The `measures` of a sweep document as a table, the published figures beside."""
    cells = data["cells"]
    successes = {
        label: f"{c['outcomes'].get('success', 0)}/{measured_trials(c)}"
        for label, c in cells.items()
    }
    axes = [(a["name"], a["values"]) for a in data["axes"]]
    source = data["reference"]["source"] if data["reference"] else None
    return measure_table(data["scenario"], data["measures"], axes, successes, source)


def amplification_matrix(data: SweepJson) -> Group:
    """Backend × / model × per cell against its fault-free baseline (two-axis sweeps; a
    one-axis sweep's table has the column already)."""
    rows, cols = data["axes"]
    table = Table(
        title=f"{shown(data['scenario'])}: amplification b×/m× vs fault-free baseline",
        title_justify="left",
    )
    table.add_column(f"{shown(rows['name'])} \\ {shown(cols['name'])}")
    for c in cols["values"]:
        table.add_column(shown(c), justify="right")
    for r in rows["values"]:
        table.add_row(shown(r), *(_amp(data["cells"][f"{r}/{c}"]) for c in cols["values"]))
    note = Text("b×/m×: backend and model calls per trial over the baseline's", style="dim")
    return Group(table, note)


def _amp(cell: ArmJson) -> str:
    amp = cell.get("amplification")
    if not amp:
        return "–"
    b, m = amp["backend_calls"], amp["model_calls"]
    return f"{'–' if b is None else f'{b:.2f}'}/{'–' if m is None else f'{m:.2f}'}"


def add_sweep(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    w = sub.add_parser(
        "sweep",
        help=summary("sweep"),
        description="Run every combination of the values of up to three scenario fields "
        "(the scenario's sweep: block, or --vary), each against its fault-free baseline, "
        "and print the matrix, with the measures the sweep: block declares (drop, "
        "recovered, error amplification).",
    )
    w.add_argument("scenario", type=path_arg)
    w.add_argument(
        "--vary",
        action="append",
        metavar="PATH=V1,V2",
        help="a dotted field path and its values, e.g. "
        "agents.researcher.policy.strategy=blind-retry,classify (repeat for up to three axes)",
    )
    scenario_options(w, ["explicit", "implicit"], "per cell")
    w.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the fault-free baseline runs (no amplification figures)",
    )
    workers_option(w)
    w.set_defaults(func=cmd_sweep)
