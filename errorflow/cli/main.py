"""The `errorflow` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from errorflow import __version__
from errorflow.agents.backends import ConfigurationError
from errorflow.bus.url import BrokerURLError, parse_broker_url
from errorflow.cli.args import nonneg, positive
from errorflow.reports.tables import paired_table, print_run, sweep_tables
from errorflow.runtime.store import DEFAULT_DB, StoreError
from errorflow.scenario.bundled import bundled, describe, resolve
from errorflow.scenario.loader import ScenarioError, load
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import OverrideError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

out = Console()
err = Console(stderr=True)


class UsageError(Exception):
    """Bad input from the user: one line on stderr, exit code 2."""


def _load(ref: str) -> Scenario:
    return load(resolve(ref))


def _broker(url: str | None) -> Any:
    return parse_broker_url(url) if url else None


# -- commands -----------------------------------------------------------------------


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not enabled,
    )


class _Bars:
    """One progress bar per run of an experiment, with a live outcome tally."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.bar: Any = None
        self.tally: dict[str, int] = {}

    def start(self, label: str, scenario: Scenario) -> None:
        self.tally = {}
        self.bar = self.progress.add_task(label, total=scenario.trials, tally="")

    def trial(self, score: Any) -> None:
        self.tally[score.outcome.value] = self.tally.get(score.outcome.value, 0) + 1
        text = " ".join(f"{k}={v}" for k, v in sorted(self.tally.items()))
        self.progress.update(self.bar, advance=1, tally=text)


def _options(args: argparse.Namespace, bars: _Bars) -> Any:
    from errorflow.runtime.runner import RunOptions

    return RunOptions(
        trials=args.trials,
        seed=args.seed,
        broker=_broker(args.broker),
        db_path=Path(args.db),
        on_trial=bars.trial,
        presence_timeout_s=getattr(args, "wait", 30.0),
        keep_messages=False,  # the store has them; memory stays flat on long runs
    )


def _show_progress(args: argparse.Namespace) -> bool:
    return not args.json and not args.quiet and sys.stderr.isatty()


def _configured(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    from errorflow.scenario.overrides import apply, parse_value

    update: dict[str, Any] = {}
    for spec in getattr(args, "set", None) or []:
        path, sep, value = spec.partition("=")
        if not sep or not path:
            raise UsageError(f"--set wants PATH=VALUE; got {spec!r}")
        update[path] = parse_value(value)
    if args.trials is not None:
        update["trials"] = args.trials
    if args.seed is not None:
        update["seed"] = args.seed
    if args.propagation in ("explicit", "implicit"):
        update["propagation"] = args.propagation
    return apply(scenario, update) if update else scenario


def cmd_run(args: argparse.Namespace) -> int:
    from errorflow.runtime.experiment import Arm, propagation_arms, run_arms
    from errorflow.runtime.runner import run_scenario

    if args.resume and (args.external_agents or args.run_id):
        raise UsageError(
            "--resume continues a run of this process; it cannot take --run-id or --external-agents"
        )
    if args.baseline and (args.external_agents or args.run_id):
        raise UsageError(
            "--baseline runs the scenario twice under new ids; it cannot take "
            "--run-id or --external-agents"
        )
    resume = _resumable(args) if args.resume else None
    if resume is not None:
        scenario = resume
    elif args.scenario is None:
        raise UsageError("name a scenario to run (or --resume RUN_ID)")
    else:
        scenario = _configured(_load(args.scenario), args)
    both = args.propagation == "both"
    if both and (args.external_agents or args.run_id):
        raise UsageError(
            "--propagation both runs two arms itself; it cannot take --external-agents or --run-id"
        )
    with _progress(_show_progress(args)) as progress:
        bars = _Bars(progress)
        options = _options(args, bars)
        options.run_id = args.resume or args.run_id
        options.resume = resume is not None
        options.external_agents = args.external_agents
        started = time.perf_counter()
        if both or args.baseline:
            arms = propagation_arms(scenario) if both else [Arm(scenario.propagation, scenario)]
            result = asyncio.run(run_arms(arms, options, baseline=args.baseline, on_arm=bars.start))
        else:
            bars.start(scenario.name, scenario)
            data = asyncio.run(run_scenario(scenario, options)).to_json()
        wall = time.perf_counter() - started
    if both:
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
        else:
            out.print(
                f"[bold]{scenario.name}[/]  group {result.group_id}  seed {scenario.seed}  "
                f"trials {scenario.trials}  explicit vs implicit propagation"
            )
            out.print(paired_table(arms_json, paired))
            out.print(f"wall time {wall:.2f}s")
        return EXIT_OK
    if args.baseline:
        data = result.arms[0].to_json()
    if args.json:
        print(json.dumps({**data, "wall_seconds": round(wall, 3)}, indent=2))
    else:
        print_run(out, data, wall)
    return EXIT_OK


def _resumable(args: argparse.Namespace) -> Scenario:
    """The scenario of an interrupted run, exactly as it ran (seed, trials, propagation)."""
    from errorflow.runtime.store import get_run
    from errorflow.scenario.identity import sha
    from errorflow.scenario.overrides import apply

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
    args.resume = run["run_id"]
    if run.get("scenario_exact", 1) and not args.scenario:
        return Scenario.model_validate_json(run["scenario_json"])
    if not args.scenario:
        raise UsageError(
            f"run {run['run_id']} used a scenario with secrets in it (stored redacted); "
            "give the same scenario file (and --set options): errorflow run SCENARIO "
            f"--resume {run['run_id']}"
        )
    stored = {"seed": run["seed"], "trials": run["trials"], "propagation": run["propagation"]}
    scenario = apply(_configured(_load(args.scenario), args), stored)
    if run.get("scenario_sha") and sha(scenario) != run["scenario_sha"]:
        raise UsageError(
            f"{args.scenario} (with these --set options) is not the scenario "
            f"run {run['run_id']} used; resuming it would mix two experiments"
        )
    return scenario


def cmd_sweep(args: argparse.Namespace) -> int:
    from errorflow.runtime.experiment import run_arms, sweep_arms
    from errorflow.scenario.overrides import parse_value

    scenario = _configured(_load(args.scenario), args)
    axes: list[tuple[str, dict[str, dict[str, Any]]]] = []
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
    arms = sweep_arms(scenario, axes)
    with _progress(_show_progress(args)) as progress:
        bars = _Bars(progress)
        started = time.perf_counter()
        result = asyncio.run(
            run_arms(arms, _options(args, bars), baseline=not args.no_baseline, on_arm=bars.start)
        )
        wall = time.perf_counter() - started
    data = {
        "group_id": result.group_id,
        "scenario": scenario.name,
        "seed": scenario.seed,
        "trials": scenario.trials,
        "axes": [{"name": name, "values": list(values)} for name, values in axes],
        "cells": {a.label: a.to_json() for a in result.arms},
        "reference": scenario.reference.model_dump() if scenario.reference else None,
        "wall_seconds": round(wall, 3),
    }
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


def cmd_report(args: argparse.Namespace) -> int:
    from errorflow.reports.report import ReportError, render

    try:
        text = render(Path(args.db), args.id, args.format)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        err.print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_agent(args: argparse.Namespace) -> int:
    from errorflow.runtime.agent_process import run_agent_process

    scenario = _load(args.scenario)
    if args.name not in scenario.agents:
        raise UsageError(
            f"no agent {args.name!r} in {scenario.name}; agents: {', '.join(scenario.agents)}"
        )
    url = _broker(args.broker)
    asyncio.run(
        run_agent_process(
            scenario, args.name, args.run, url, propagation=args.propagation, seed=args.seed
        )
    )
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    scenario = _load(args.scenario)
    from errorflow.agents.backends import check_backends

    check_backends(scenario, env={"ANTHROPIC_API_KEY": "(not checked)"})
    out.print(
        f"[green]ok[/] {args.scenario}: scenario {scenario.name!r}, "
        f"{len(scenario.agents)} agents, {len(scenario.tools)} tools, "
        f"{scenario.trials} trials, propagation {scenario.propagation}"
    )
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from errorflow.bus.envelope import json_schema

    print(json.dumps(json_schema(), indent=2))
    return EXIT_OK


def cmd_scenarios(args: argparse.Namespace) -> int:
    table = Table(title="Bundled scenarios", title_justify="left")
    table.add_column("name")
    table.add_column("what it shows")
    for name, path in bundled().items():
        table.add_row(name, describe(path))
    out.print(table)
    out.print("run one with: errorflow run NAME   (or a path to your own YAML file)")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    from errorflow.runtime.store import list_runs

    rows = list_runs(Path(args.db))
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = Table(title=f"Runs in {args.db}", title_justify="left")
    for col in ("run id", "scenario", "seed", "trials", "propagation", "status", "started"):
        table.add_column(col)
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["started"]))
        table.add_row(
            r["run_id"],
            r["scenario"],
            str(r["seed"]),
            str(r["trials"]),
            r["propagation"],
            r["status"],
            started,
        )
    out.print(table)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from errorflow.runtime.store import get_run

    run = get_run(Path(args.db), args.run_id)
    if run is None:
        raise UsageError(f"no run {args.run_id!r} in {args.db} (see `errorflow runs`)")
    if args.json:
        print(json.dumps(run, indent=2, default=str))
        return EXIT_OK
    summary = run.get("summary") or {}
    out.print(f"status: {run['status']}   stored: {run['counts']}")
    if summary:
        print_run(
            out,
            {
                **summary,
                "run_id": run["run_id"],
                "scenario": run["scenario"],
                "seed": run["seed"],
                "propagation": run["propagation"],
                "broker": run["broker"],
                "rejects": run["rejects_by_reason"],
            },
        )
    return EXIT_OK


# -- parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="errorflow",
        description="Simulate multi-agent LLM systems over MQTT, inject tool faults and "
        "measure whether failures are contained or contaminate downstream agents.",
        epilog="Scenario arguments take a path or the name of a bundled scenario "
        "(see `errorflow scenarios`).",
    )
    p.add_argument("--version", action="version", version=f"errorflow {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug output to stderr")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def db_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--db",
            default=str(DEFAULT_DB),
            help=f"SQLite file runs are stored in (default: {DEFAULT_DB})",
        )

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

    rp = sub.add_parser(
        "report",
        help="write a report of a stored run or group (comparison, sweep)",
        description="Report a stored run, or a group of runs (`run --propagation both`, "
        "`sweep`), from the SQLite store: outcomes with 95% Wilson intervals, costs, "
        "amplification against the fault-free baseline, paired differences.",
    )
    rp.add_argument("id", help="run id or group id")
    rp.add_argument("--format", choices=["md", "json", "csv", "html"], default="md")
    rp.add_argument("-o", "--output", help="write to this file instead of stdout")
    db_arg(rp)
    rp.set_defaults(func=cmd_report)

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

    v = sub.add_parser("validate", help="check a scenario file and explain every problem")
    v.add_argument("scenario")
    v.set_defaults(func=cmd_validate)

    s = sub.add_parser("schema", help="print the message envelope's JSON Schema")
    s.set_defaults(func=cmd_schema)

    sc = sub.add_parser("scenarios", help="list the bundled scenarios")
    sc.set_defaults(func=cmd_scenarios)

    rs = sub.add_parser("runs", help="list stored runs")
    rs.add_argument("--json", action="store_true")
    db_arg(rs)
    rs.set_defaults(func=cmd_runs)

    sh = sub.add_parser("show", help="print one stored run")
    sh.add_argument("run_id", help="run id (a unique prefix is enough)")
    sh.add_argument("--json", action="store_true")
    db_arg(sh)
    sh.set_defaults(func=cmd_show)
    from errorflow.cli.tui_commands import add_commands

    add_commands(sub)  # `tui` and `serve`
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except ScenarioError as exc:
        return _fail(f"invalid scenario\n{exc}", EXIT_USAGE)
    except (UsageError, BrokerURLError, ConfigurationError, OverrideError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    except FileNotFoundError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except (ConnectionError, TimeoutError, StoreError) as exc:
        return _fail(str(exc), EXIT_FAILURE)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _fail(message: str, code: int) -> int:
    """One plain message on stderr (user text is never read as rich markup)."""
    err.print(Text("error", style="red") + Text(f": {message}"), highlight=False, soft_wrap=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
