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

from errorflow import __version__
from errorflow.agents.backends import ConfigurationError
from errorflow.bundled import bundled, describe, resolve
from errorflow.bus.url import BrokerURLError, parse_broker_url
from errorflow.scenario import Scenario
from errorflow.scenario_loader import ScenarioError, load
from errorflow.store import DEFAULT_DB

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


def cmd_run(args: argparse.Namespace) -> int:
    from errorflow.runner import RunOptions, run_scenario

    scenario = _load(args.scenario)
    trials = args.trials or scenario.trials
    show_progress = not args.json and sys.stderr.isatty() and not args.quiet
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not show_progress,
    )
    tally: dict[str, int] = {}
    with progress:
        bar = progress.add_task(scenario.name, total=trials, tally="")

        def on_trial(score: Any) -> None:
            tally[score.outcome.value] = tally.get(score.outcome.value, 0) + 1
            progress.update(
                bar, advance=1, tally=" ".join(f"{k}={v}" for k, v in sorted(tally.items()))
            )

        options = RunOptions(
            trials=args.trials,
            seed=args.seed,
            propagation=args.propagation,
            broker=_broker(args.broker),
            db_path=Path(args.db),
            run_id=args.run_id,
            external_agents=args.external_agents,
            on_trial=on_trial,
            presence_timeout_s=args.wait,
        )
        started = time.perf_counter()
        result = asyncio.run(run_scenario(scenario, options))
        wall = time.perf_counter() - started
    if args.json:
        print(json.dumps({**result.to_json(), "wall_seconds": round(wall, 3)}, indent=2))
    else:
        print_summary(result.to_json(), wall)
    return EXIT_OK


def print_summary(data: dict[str, Any], wall: float | None = None) -> None:
    out.print(
        f"[bold]{data['scenario']}[/]  run {data['run_id']}  seed {data['seed']}  "
        f"trials {data['trials']}  propagation {data['propagation']}"
    )
    out.print(f"broker: {data['broker']}")
    table = Table(title="Outcomes", title_justify="left")
    table.add_column("outcome")
    table.add_column("trials", justify="right")
    table.add_column("rate", justify="right")
    table.add_column("95% CI", justify="right")
    rates = data["metrics"]["rates"]
    for outcome, count in data["outcomes"].items():
        if count == 0 and outcome == "bus_fault":
            continue
        r = rates[outcome]
        table.add_row(
            outcome, str(count), f"{r['rate']:.0%}", f"{r['ci95'][0]:.0%}–{r['ci95'][1]:.0%}"
        )
    out.print(table)
    m = data["metrics"]
    per = m["per_trial"]
    out.print(
        f"per trial: backend calls {per['backend_calls']:.2f}, model calls "
        f"{per['model_calls']:.2f}, tokens {per['input_tokens'] + per['output_tokens']:.0f}, "
        f"retries {per['retries']:.2f}, simulated time {per['sim_seconds']:.2f}s"
    )
    if m["max_depth"]:
        out.print(f"contamination depth: mean {m['mean_depth']:.2f}, max {m['max_depth']} hops")
    if data.get("rejects"):
        out.print(f"rejected messages: {data['rejects']}")
    if wall is not None:
        out.print(f"wall time {wall:.2f}s")


def cmd_agent(args: argparse.Namespace) -> int:
    from errorflow.agent_process import run_agent_process

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
    from errorflow.store import list_runs

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
    from errorflow.store import get_run

    run = get_run(Path(args.db), args.run_id)
    if run is None:
        raise UsageError(f"no run {args.run_id!r} in {args.db} (see `errorflow runs`)")
    if args.json:
        print(json.dumps(run, indent=2, default=str))
        return EXIT_OK
    summary = run.get("summary") or {}
    out.print(f"status: {run['status']}   stored: {run['counts']}")
    if summary:
        print_summary(
            {
                **summary,
                "run_id": run["run_id"],
                "scenario": run["scenario"],
                "seed": run["seed"],
                "propagation": run["propagation"],
                "broker": run["broker"],
                "rejects": run["rejects_by_reason"],
            }
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

    r = sub.add_parser(
        "run",
        help="run a scenario's trials and print the outcomes",
        description="Run a scenario: start the embedded MQTT broker (or use "
        "--broker), the recorder and the agents, run the trials, print a summary.",
    )
    r.add_argument("scenario", help="scenario file or bundled scenario name")
    r.add_argument("--trials", type=_positive, help="number of trials (default: the scenario's)")
    r.add_argument("--seed", type=_nonneg, help="seed (default: the scenario's)")
    r.add_argument(
        "--propagation",
        choices=["explicit", "implicit"],
        help="error propagation (default: the scenario's)",
    )
    r.add_argument(
        "--broker",
        metavar="URL",
        help="external broker, mqtt://[user:pass@]HOST:PORT or mqtts://... "
        "(default: an embedded amqtt broker on 127.0.0.1)",
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
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    db_arg(r)
    r.set_defaults(func=cmd_run)

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
    a.add_argument("--seed", type=_nonneg, help="must match the runner's")
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
    return p


def _positive(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _nonneg(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except ScenarioError as exc:
        err.print(f"[red]error[/]: invalid scenario\n{exc}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except (UsageError, BrokerURLError, ConfigurationError) as exc:
        err.print(f"[red]error[/]: {exc}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except FileNotFoundError as exc:
        err.print(f"[red]error[/]: {exc}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except (ConnectionError, TimeoutError) as exc:
        err.print(f"[red]error[/]: {exc}", highlight=False, soft_wrap=True)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
