"""`errorflow run SCENARIO --compare-real --profile P`: the scenario with its real
models and with their calibrated simulation, on the same trials, seeds and faults
(errorflow.calibration.compare), printed side by side: per outcome and per agent both
rates and their paired difference with its 95 % interval."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from pathlib import Path

from rich.table import Table

from errorflow.calibration.compare import (
    REAL,
    SIMULATED,
    CompareError,
    Row,
    compare,
    compare_arms,
    rows_json,
)
from errorflow.cli.console import out
from errorflow.cli.errors import EXIT_OK, RunFailure, UsageError
from errorflow.cli.preflight import writable_db
from errorflow.cli.progress import Bars, progress_bars, wanted
from errorflow.cli.run_options import requested_workers, run_options
from errorflow.cli.signals import interruptible
from errorflow.cli.spend import check_spend, print_traffic, traffic_doc
from errorflow.core.display import signed_pct
from errorflow.reports.profile_lines import profile_lines, profiles_doc
from errorflow.runtime.experiment import run_arms
from errorflow.scenario.loader import ScenarioError
from errorflow.scenario.spec.model import Scenario
from errorflow.store.agent_labels import agent_labels


def refuse(args: argparse.Namespace) -> None:
    """What --compare-real cannot go with, said before anything runs."""
    if not args.profile:
        raise UsageError("name the simulation to compare with: --profile P", where="--compare-real")
    clashes = [
        name
        for name, on in (
            ("--propagation both", args.propagation == "both"),
            ("--resume", bool(args.resume)),
            ("--external-agents", args.external_agents),
            ("--remote-workers", bool(args.remote_workers)),
            ("--baseline", args.baseline),
            ("--run-id", bool(args.run_id)),
        )
        if on
    ]
    if clashes:
        raise UsageError(
            f"runs two arms itself; it cannot take {clashes[0]}", where="--compare-real"
        )


def _table(rows: list[Row], profile: str) -> Table:
    table = Table(title=f"Real model vs its simulation ({profile}), same trials",
                  title_justify="left")  # fmt: skip
    for name in ("", "real", "simulated", "real − simulated (95% CI)", "discordant"):
        table.add_column(name, justify="left" if not name else "right")
    for r in rows:
        d = r.difference
        interval = f"{signed_pct(d['low'])} to {signed_pct(d['high'])}"
        table.add_row(r.measure, f"{r.real:.0%}", f"{r.simulated:.0%}",
                      f"{signed_pct(d['diff'])} ({interval})",
                      f"{d['only_a']} vs {d['only_b']} of {d['n']}")  # fmt: skip
    return table


def run_compare(args: argparse.Namespace, scenario: Scenario) -> int:
    refuse(args)
    try:
        arms = compare_arms(scenario, args.profile)
    except CompareError as exc:
        raise UsageError(str(exc), where="--compare-real") from None
    except ScenarioError as exc:
        raise UsageError(str(exc).splitlines()[-1], where="--profile") from None
    if check_spend(args, arms[:1], False):
        return EXIT_OK
    writable_db(args.db)
    group_id = f"{scenario.name}-real-{uuid.uuid4().hex[:6]}"
    with progress_bars(args) as progress:
        bars = Bars(progress, [REAL, SIMULATED], unit="arm", log=wanted(args))
        options = run_options(args, bars)
        result = asyncio.run(interruptible(run_arms(
            arms, options, baseline=False, group_id=group_id, on_arm=bars.start,
            workers=requested_workers(args),
        )))  # fmt: skip
    real, simulated = result.arm(REAL).result, result.arm(SIMULATED).result
    db = Path(args.db)
    rows = compare(real.scores, simulated.scores, agent_labels(db, real.run_id),
                   agent_labels(db, simulated.run_id))  # fmt: skip
    if args.json:
        doc = {"group_id": group_id, "scenario": scenario.name, "seed": scenario.seed,
               "trials": scenario.trials, "profile": args.profile,
               "arms": {a.label: a.to_json() for a in result.arms},
               "compare_real": rows_json(rows),
               "profiles": profiles_doc(arms[1].scenario), **traffic_doc(args)}  # fmt: skip
        print(json.dumps(doc, indent=2))
    else:
        out.print(f"{scenario.name}  group {group_id}  seed {scenario.seed}  "
                  f"trials {scenario.trials}", highlight=False)  # fmt: skip
        out.print(_table(rows, args.profile))
        for line in profile_lines(arms[1].scenario):
            out.print(line, highlight=False)
    print_traffic(args)
    if result.infra_faults:  # printed, but less was measured than asked: the command fails
        reasons = result.infra_reasons
        why = f": {reasons[0]}" if reasons else ""
        raise RunFailure(f"{result.infra_faults} trials hit an infrastructure fault, not "
                         f"counted{why}")  # fmt: skip
    return EXIT_OK
