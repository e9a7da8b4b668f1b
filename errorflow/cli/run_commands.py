"""`errorflow run`, `errorflow sweep` and `errorflow agent`: the commands that run trials.

The scenario a command runs is the file, then its `--set` overrides, then the run
settings (`--trials`, `--seed`, `--propagation`), applied by `with_settings` (the one
place they are applied); the runner is handed the scenario ready and no settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from errorflow.bus.url import BrokerURL, parse_broker_url
from errorflow.cli.args import EXIT_OK, UsageError, db_arg, nonneg, positive
from errorflow.cli.console import err, out
from errorflow.reports.tables import paired_table, print_run
from errorflow.runtime.agent_process import run_agent_process
from errorflow.runtime.experiment import (
    Arm,
    ExperimentResult,
    propagation_arms,
    run_arms,
)
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.runtime.store import get_run
from errorflow.scenario.bundled import resolve
from errorflow.scenario.identity import sha
from errorflow.scenario.loader import load
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import apply, parse_value, with_settings
from errorflow.scoring.score import TrialScore
from errorflow.scoring.summary import RunJson


def load_ref(ref: str) -> Scenario:
    """A scenario by path or bundled name."""
    return load(resolve(ref))


def broker_of(url: str | None) -> BrokerURL | None:
    return parse_broker_url(url) if url else None


# -- the scenario a command line describes ---------------------------------------------


class RunSettings(TypedDict):
    """The run settings of a command line (None: the scenario's own)."""

    trials: int | None
    seed: int | None
    propagation: str | None


def settings_of(args: argparse.Namespace) -> RunSettings:
    both = args.propagation not in ("explicit", "implicit")  # `both` runs each in turn
    return RunSettings(
        trials=args.trials, seed=args.seed, propagation=None if both else args.propagation
    )


def with_sets(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """The scenario with the command line's `--set PATH=VALUE` overrides."""
    update: dict[str, object] = {}
    for spec in getattr(args, "set", None) or []:
        path, sep, value = spec.partition("=")
        if not sep or not path:
            raise UsageError(f"--set wants PATH=VALUE; got {spec!r}")
        update[path] = parse_value(value)
    return apply(scenario, update) if update else scenario


def configured(args: argparse.Namespace) -> Scenario:
    """The scenario file, its `--set` overrides, then the run settings."""
    return with_settings(with_sets(load_ref(args.scenario), args), **settings_of(args))


# -- progress ---------------------------------------------------------------------------


def progress_bars(args: argparse.Namespace) -> Progress:
    enabled = not args.json and not args.quiet and sys.stderr.isatty()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not enabled,
    )


class Bars:
    """One progress bar per run of an experiment, with a live outcome tally."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.bar: TaskID | None = None
        self.tally: dict[str, int] = {}

    def start(self, label: str, scenario: Scenario) -> None:
        self.tally = {}
        self.bar = self.progress.add_task(label, total=scenario.trials, tally="")

    def trial(self, score: TrialScore) -> None:
        self.tally[score.outcome.value] = self.tally.get(score.outcome.value, 0) + 1
        text = " ".join(f"{k}={v}" for k, v in sorted(self.tally.items()))
        if self.bar is not None:
            self.progress.update(self.bar, advance=1, tally=text)


def run_options(
    args: argparse.Namespace,
    bars: Bars,
    *,
    run_id: str | None = None,
    resume: bool = False,
    external_agents: bool = False,
) -> RunOptions:
    """How to run: the broker, the store and the progress bars (the settings are applied
    to the scenario already, so the runner is given none)."""
    return RunOptions(
        broker=broker_of(args.broker),
        db_path=Path(args.db),
        run_id=run_id,
        resume=resume,
        external_agents=external_agents,
        on_trial=bars.trial,
        presence_timeout_s=getattr(args, "wait", 30.0),
        keep_messages=False,  # the store has them; memory stays flat on long runs
    )


# -- run ----------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    others = args.external_agents or args.run_id
    if args.resume and others:
        raise UsageError(
            "--resume continues a run of this process; it cannot take --run-id or --external-agents"
        )
    if args.baseline and others:
        raise UsageError(
            "--baseline runs the scenario twice under new ids; it cannot take "
            "--run-id or --external-agents"
        )
    scenario = _scenario_to_run(args)
    both = args.propagation == "both"
    if both and others:
        raise UsageError(
            "--propagation both runs two arms itself; it cannot take --external-agents or --run-id"
        )
    with progress_bars(args) as progress:
        bars = Bars(progress)
        options = run_options(
            args,
            bars,
            run_id=args.resume or args.run_id,
            resume=bool(args.resume),
            external_agents=args.external_agents,
        )
        started = time.perf_counter()
        if both:
            arms = propagation_arms(scenario)
            result = asyncio.run(run_arms(arms, options, baseline=args.baseline, on_arm=bars.start))
        else:
            data = asyncio.run(_run_once(scenario, options, bars, baseline=args.baseline))
        wall = time.perf_counter() - started
    if both:
        _print_paired(args, scenario, result, wall)
    elif args.json:
        print(json.dumps({**data, "wall_seconds": round(wall, 3)}, indent=2))
    else:
        print_run(out, data, wall)
    return EXIT_OK


async def _run_once(
    scenario: Scenario, options: RunOptions, bars: Bars, *, baseline: bool
) -> RunJson:
    """One run; with `baseline`, measured against the same run without faults."""
    if baseline:
        arm = Arm(scenario.propagation, scenario)
        result = await run_arms([arm], options, baseline=True, on_arm=bars.start)
        return result.arms[0].to_json()
    bars.start(scenario.name, scenario)
    return (await run_scenario(scenario, options)).to_json()


def _print_paired(
    args: argparse.Namespace, scenario: Scenario, result: ExperimentResult, wall: float
) -> None:
    arms_json = {a.label: a.to_json() for a in result.arms}
    paired = result.paired("explicit", "implicit")
    if args.json:
        doc = {
            "group_id": result.group_id,
            "scenario": scenario.name,
            "seed": scenario.seed,
            "trials": scenario.trials,
            "propagation": "both",
            "arms": arms_json,
            "paired": paired,
            "wall_seconds": round(wall, 3),
        }
        print(json.dumps(doc, indent=2))
        return
    out.print(
        f"[bold]{scenario.name}[/]  group {result.group_id}  seed {scenario.seed}  "
        f"trials {scenario.trials}  explicit vs implicit propagation"
    )
    out.print(paired_table(arms_json, paired))
    out.print(f"wall time {wall:.2f}s")


def _scenario_to_run(args: argparse.Namespace) -> Scenario:
    if args.resume:
        return _resumable(args)
    if args.scenario is None:
        raise UsageError("name a scenario to run (or --resume RUN_ID)")
    return configured(args)


def _resumable(args: argparse.Namespace) -> Scenario:
    """The scenario of an interrupted run, exactly as it ran (seed, trials, propagation)."""
    run = _interrupted_run(args)
    args.resume = run["run_id"]
    if run.get("scenario_exact", 1) and not args.scenario:
        return Scenario.model_validate_json(run["scenario_json"])
    if not args.scenario:
        raise UsageError(
            f"run {run['run_id']} used a scenario with secrets in it (stored redacted); "
            "give the same scenario file (and --set options): errorflow run SCENARIO "
            f"--resume {run['run_id']}"
        )
    scenario = with_settings(
        with_sets(load_ref(args.scenario), args),
        trials=run["trials"],
        seed=run["seed"],
        propagation=run["propagation"],
    )
    if run.get("scenario_sha") and sha(scenario) != run["scenario_sha"]:
        raise UsageError(
            f"{args.scenario} (with these --set options) is not the scenario "
            f"run {run['run_id']} used; resuming it would mix two experiments"
        )
    return scenario


def _interrupted_run(args: argparse.Namespace) -> Mapping[str, Any]:
    """The stored run `--resume` names, if it can be resumed."""
    if args.trials or args.seed is not None or args.propagation or args.baseline:
        raise UsageError(
            "--resume takes trials, seed and propagation from the stored run; "
            "give only --resume RUN_ID (and the scenario file when asked)"
        )
    run = get_run(Path(args.db), args.resume)
    if run is None:
        raise UsageError(f"no run {args.resume!r} in {args.db} (see `errorflow runs`)")
    if run["status"] == "finished":
        raise UsageError(f"run {run['run_id']} is finished; nothing to resume")
    if run["status"] == "running":
        raise UsageError(f"run {run['run_id']} is still running (process {run.get('pid')})")
    return run


# -- agent --------------------------------------------------------------------------------


def cmd_agent(args: argparse.Namespace) -> int:
    scenario = load_ref(args.scenario)
    if args.name not in scenario.agents:
        raise UsageError(
            f"no agent {args.name!r} in {scenario.name}; agents: {', '.join(scenario.agents)}"
        )
    url = parse_broker_url(args.broker)  # required by the parser
    asyncio.run(
        run_agent_process(
            scenario, args.name, args.run, url, propagation=args.propagation, seed=args.seed
        )
    )
    return EXIT_OK


# -- parsers ------------------------------------------------------------------------------


def scenario_options(sp: argparse.ArgumentParser, propagation: list[str], what: str) -> None:
    """Options shared by the commands that run a scenario."""
    sp.add_argument("--trials", type=positive, help=f"trials {what} (default: the scenario's)")
    sp.add_argument("--seed", type=nonneg, help="seed (default: the scenario's)")
    sp.add_argument(
        "--propagation",
        choices=propagation,
        help="error propagation (default: the scenario's)"
        + (
            "; `both` runs the two arms on the same seeds and prints them side by side "
            "with the paired difference"
            if "both" in propagation
            else ""
        ),
    )
    sp.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help="override one scenario field (dotted path, YAML value), e.g. "
        "--set agents.writer.model.profile=frontier; repeatable",
    )
    sp.add_argument(
        "--broker",
        metavar="URL",
        help="external broker, mqtt://[user:pass@]HOST:PORT or mqtts://...?ca=FILE "
        "(default: an embedded amqtt broker on 127.0.0.1)",
    )
    sp.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    db_arg(sp)


def add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser(
        "run",
        help="run a scenario's trials and print the outcomes",
        description="Run a scenario: start the embedded MQTT broker (or use --broker), the "
        "recorder and the agents, run the trials, print outcomes with 95% intervals.",
    )
    r.add_argument("scenario", nargs="?", help="scenario file or bundled scenario name")
    scenario_options(r, ["explicit", "implicit", "both"], "to run")
    r.add_argument(
        "--baseline",
        action="store_true",
        help="also run the scenario with every fault removed (same seeds) and report "
        "backend-call and model-call amplification against it",
    )
    r.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="finish the missing trials of an interrupted run (same seed, same settings)",
    )
    r.add_argument("--run-id", help="run id to use (default: generated)")
    r.add_argument(
        "--external-agents",
        action="store_true",
        help="do not start agents; wait for `errorflow agent` processes to join",
    )
    r.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for all agents to be present (default: 30)",
    )
    r.set_defaults(func=cmd_run)


def add_agent(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    a = sub.add_parser(
        "agent",
        help="run one agent of a scenario that joins a run on a broker",
        description="Run a single agent as its own process. It joins run RUN_ID "
        "on the broker and serves until the runner stops the run.",
    )
    a.add_argument("scenario")
    a.add_argument("--name", required=True, help="which agent of the scenario to run")
    a.add_argument("--broker", required=True, metavar="URL", help="mqtt://HOST:PORT")
    a.add_argument("--run", required=True, metavar="RUN_ID", help="the run to join")
    a.add_argument(
        "--propagation", choices=["explicit", "implicit"], help="must match the runner's"
    )
    a.add_argument("--seed", type=nonneg, help="must match the runner's")
    a.set_defaults(func=cmd_agent)
