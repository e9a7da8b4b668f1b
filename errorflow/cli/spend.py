"""What a command's real models will cost, before any call: `--dry-run` prints it, and a
real run that would cost more than `--max-cost` (or, for a remote model without a
price, make more than `--max-calls` calls) asks first, unless `--yes`.

The estimate runs the same runs (every arm, and the fault-free baselines the command
would run) in-process, on the embedded broker and a throwaway store, with the simulated
model answering for every real one (errorflow/models/model_estimate.py). After a real
run, `print_traffic` says what was actually sent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text

from errorflow.cli.console import err, out
from errorflow.cli.errors import RunFailure, UsageError
from errorflow.cli.serving_options import prices_of
from errorflow.models import serving
from errorflow.models.backends import check_backends
from errorflow.models.model_estimate import Bound, run_bounds
from errorflow.models.serving import (
    Serving,
    Tally,
    is_local,
    model_label,
)
from errorflow.reports.model_traffic import (
    EstimateJson,
    TrafficJson,
    estimate_json,
    estimate_table,
    timeout_hints,
    traffic_json,
    traffic_lines,
)
from errorflow.reports.prices import dollars
from errorflow.runtime.experiment import Arm, propagation_arms, run_arms
from errorflow.runtime.run_options import RunOptions
from errorflow.scenario.overrides import without_faults
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario


def _real_labels(scenario: Scenario, remote_only: bool = False) -> set[str]:
    return {
        model_label(a.model)
        for a in scenario.agents.values()
        if a.model.backend != "simulated" and not (remote_only and is_local(a.model))
    }


def arms_of(scenario: Scenario, both: bool) -> list[Arm]:
    """The arms `errorflow run` runs: both propagations, or the scenario's own."""
    return propagation_arms(scenario) if both else [Arm(scenario.propagation, RunPlan(scenario))]


def planned_runs(arms: list[Arm], baseline: bool) -> list[Scenario]:
    """Every run the command makes: each arm, then each distinct fault-free baseline."""
    runs = [a.scenario for a in arms]
    if baseline:
        seen: set[str] = set()
        for arm in arms:
            clean = without_faults(arm.scenario)
            key = clean.model_dump_json()
            if key not in seen:
                seen.add(key)
                runs.append(clean)
    return runs


@dataclass(frozen=True)
class Estimate:
    models: dict[str, EstimateJson]
    runs: int
    trials: int


def estimate(arms: list[Arm], baseline: bool, args: argparse.Namespace) -> Estimate:
    """The simulated path through the command's runs, counted as real requests."""
    tally = Tally()
    with tempfile.TemporaryDirectory() as tmp, serving.serving(Serving(tally=tally)):
        options = RunOptions(db_path=Path(tmp) / "estimate.db", keep_messages=False)
        asyncio.run(run_arms(arms, options, baseline=baseline))
    runs = planned_runs(arms, baseline)
    bounds: dict[str, Bound] = {}
    for scenario in runs:
        for label, bound in run_bounds(scenario, tally).items():
            bounds[label] = bounds.get(label, Bound()) + bound
    models = estimate_json(tally, bounds, prices_of(args))
    return Estimate(models, len(runs), sum(s.trials for s in runs))


def _title(e: Estimate) -> str:
    return (
        f"Dry run: no model called. {e.runs} run(s), {e.trials} trials in all; expected: "
        "the simulated model's path, requests rendered as sent; at most: what the policy "
        "allows (guards × model retries × rounds, max_tokens a reply)"
    )


def _over(e: Estimate, args: argparse.Namespace, remote: set[str]) -> list[str]:
    """Why the run must be confirmed (empty: it need not be)."""
    why = []
    for label, m in e.models.items():
        cost, calls = m["expected"]["cost_usd"], m["expected"]["calls"]
        if cost is not None and cost > args.max_cost:
            why.append(f"{label}: expected {dollars(cost)} > --max-cost {dollars(args.max_cost)}")
        elif cost is None and label in remote and calls > args.max_calls:
            why.append(f"{label}: expected {calls:,} calls (no --price) > --max-calls "
                       f"{args.max_calls:,}")  # fmt: skip
    return why


def check_spend(args: argparse.Namespace, arms: list[Arm], baseline: bool) -> bool:
    """`--dry-run`: print the estimate and return True (the command runs nothing). A real
    run: ask when it would cost more than the limits (a refusal ends the command);
    False when it may go ahead. Replays and simulated runs cost nothing and pass."""
    runs = planned_runs(arms, baseline)
    real = set().union(*(_real_labels(s) for s in runs))
    remote = set().union(*(_real_labels(s, remote_only=True) for s in runs))
    priced = {label for label in real if label.split(" @ ", 1)[0] in prices_of(args)}
    if not args.dry_run and (args.yes or not (remote | priced) or args.backend):
        return False  # nothing to pay for (or the user said so): no estimate
    if not args.dry_run:
        for scenario in runs:  # a missing API key fails now, not after the estimate
            check_backends(scenario)
    e = estimate(arms, baseline, args) if real else Estimate({}, len(runs), 0)
    if args.dry_run:
        if args.json:
            doc = {"dry_run": True, "runs": e.runs, "trials": e.trials, "models": e.models}
            print(json.dumps(doc, indent=2))
        elif real:
            out.print(estimate_table(e.models, _title(e)))
        else:
            out.print("dry run: no agent calls a real model, so the run costs nothing")
        return True
    why = _over(e, args, remote)
    if why:
        _confirm(e, why)
    return False


def _confirm(e: Estimate, why: list[str]) -> None:
    reason = "; ".join(why)
    if not sys.stdin.isatty():
        raise UsageError(f"{reason}: rerun with --yes to run it anyway (or --dry-run to see "
                         "the estimate)", where="--max-cost")  # fmt: skip
    err.print(estimate_table(e.models, _title(e)))
    err.print(reason)
    answer = input("Run it? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise RunFailure("not run: declined at the cost check")


def traffic(args: argparse.Namespace) -> dict[str, TrafficJson]:
    """What real models were sent by this command (empty: none was)."""
    return traffic_json(serving.current(), prices_of(args))


def traffic_doc(args: argparse.Namespace) -> dict[str, dict[str, TrafficJson]]:
    """`{"model_traffic": ...}` for a `--json` document, or nothing when no real model
    was served (a simulated run's document is what it always was)."""
    data = traffic(args)
    return {"model_traffic": data} if data else {}


def print_traffic(args: argparse.Namespace) -> None:
    data = traffic(args)
    if data and not args.json:
        for line in traffic_lines(data):
            out.print(Text(line), highlight=False)
    for hint in timeout_hints(data):
        err.print(Text(hint), highlight=False, soft_wrap=True)
