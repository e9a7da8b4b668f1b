"""The options shared by the commands that run a scenario (`run`, `sweep`, `agent`, `tui`):
the scenario they describe, and how to run it (broker, store, progress, run key, and for
`run` and `sweep` how real models are served: errorflow/cli/serving_options.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from errorflow.cli.args import (
    db_arg,
    nonneg,
    nonneg_float,
    positive,
    wait_seconds,
)
from errorflow.cli.console import say
from errorflow.cli.errors import UsageError
from errorflow.cli.preflight import broker_of
from errorflow.cli.progress import Bars
from errorflow.cli.scenario_input import parse_sets, scenario_from
from errorflow.cli.serving_options import model_options, serving_of
from errorflow.models import serving
from errorflow.runtime import broker_workers
from errorflow.runtime.liveness import DEFAULT_GRACE_S
from errorflow.runtime.run_options import DEFAULT_TRIAL_TIMEOUT_S, RunOptions
from errorflow.runtime.workers import (
    AUTO,
    LARGE_RUN,
    WorkerCount,
    WorkersRefused,
    refusal,
)
from errorflow.runtime.workers import count_for as workers_for
from errorflow.scenario.overrides import without_faults
from errorflow.scenario.run_plan import RunSettings
from errorflow.scenario.spec.model import Scenario


def settings_of(args: argparse.Namespace) -> RunSettings:
    both = args.propagation not in ("explicit", "implicit")  # `both` runs each in turn
    return RunSettings(
        trials=args.trials, seed=args.seed, propagation=None if both else args.propagation
    )


def scenario_of(args: argparse.Namespace) -> Scenario:
    """The scenario file, its `--set` overrides, then the run settings, checked; with
    `--no-faults`, every injected fault removed."""
    scenario = scenario_from(
        args.scenario, parse_sets(getattr(args, "set", None)), settings_of(args)
    )
    return without_faults(scenario) if getattr(args, "no_faults", False) else scenario


def run_options(
    args: argparse.Namespace,
    bars: Bars,
    *,
    run_id: str | None = None,
    resume: bool = False,
    external_agents: bool = False,
    run_key: bytes | None = None,
) -> RunOptions:
    """How to run: the broker, the store, the progress bars and the run key (the settings
    are applied to the scenario already, so the runner is given none). How real models
    are served is installed for the rest of the command (`serving.current()` has it)."""
    if hasattr(args, "cache"):  # `run` and `sweep` take the model options
        serving.install(serving_of(args))
    return RunOptions(
        broker=broker_of(args.broker),
        db_path=Path(args.db),
        run_id=run_id,
        resume=resume,
        external_agents=external_agents,
        on_trial=bars.trial,
        presence_timeout_s=getattr(args, "wait", 30.0),
        grace_s=getattr(args, "grace_s", DEFAULT_GRACE_S),
        trial_timeout_s=getattr(args, "trial_timeout", DEFAULT_TRIAL_TIMEOUT_S),
        keep_messages=False,  # the store has them; memory stays flat on long runs
        run_key=run_key,
    )


#: The longest grace period (`--grace-s`): an hour, far beyond any restart.
MAX_GRACE_S = 3600.0


def grace_seconds(text: str) -> float:
    value = nonneg_float(text)
    if not 0 < value <= MAX_GRACE_S:
        raise argparse.ArgumentTypeError(
            f"expected more than 0 and at most {MAX_GRACE_S:g} seconds, found {text}"
        )
    return value


def grace_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--grace-s",
        type=grace_seconds,
        default=DEFAULT_GRACE_S,
        metavar="S",
        help="how long a participant that went away (an `errorflow agent`, the broker) "
        "is waited for before the run ends, its trials in flight marked infra_fault "
        f"(default: {DEFAULT_GRACE_S:g}); an agent restarted meanwhile rejoins",
    )


def trial_timeout_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--trial-timeout",
        type=wait_seconds,
        default=DEFAULT_TRIAL_TIMEOUT_S,
        metavar="SECONDS",
        help="how long the runner waits for a trial's final result before it scores the "
        f"trial bus_fault (default: {DEFAULT_TRIAL_TIMEOUT_S:g}); the time its agents "
        "wait on model servers (for a slot, a 429 or the reply) and on Python and MCP "
        "tools does not count (--external-agents say theirs in their heartbeat, once a "
        "second)",
    )


def scenario_args(sp: argparse.ArgumentParser, propagation: list[str], what: str) -> None:
    """The options that change the scenario: settings and `--set` overrides."""
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
        "--no-faults",
        action="store_true",
        help="remove every injected fault (tools, agents, models, the bus) after the "
        "overrides: the fault-free run of the same system and seeds",
    )


def scenario_options(sp: argparse.ArgumentParser, propagation: list[str], what: str) -> None:
    """Options shared by the commands that run a scenario and print its results."""
    scenario_args(sp, propagation, what)
    sp.add_argument(
        "--broker",
        metavar="URL",
        help="external broker, mqtt://[user:pass@]HOST:PORT or mqtts://...?ca=FILE "
        "(default: none; the run is held in this process, on an in-process bus)",
    )
    sp.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    db_arg(sp)
    model_options(sp)


def worker_count(text: str) -> WorkerCount:
    return AUTO if text == AUTO else positive(text)


def workers_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--workers",
        type=worker_count,
        default=None,  # auto, unless given (`requested_workers`)
        metavar="N|auto",
        help="spread each run's trials over N processes, each running its share on an "
        "in-process bus of its own (no broker), with the outcomes one process gives; "
        f"`auto` (the default): one per core for runs of {LARGE_RUN:,} trials or more "
        "that need no broker, else 1. Runs on --broker or with external agents, runs "
        "whose state lives across trials and runs that call real models run in one "
        "process (`--workers 1` always does)",
    )


def requested_workers(args: argparse.Namespace) -> WorkerCount:
    """`--workers` as given, `auto` when not given."""
    given: WorkerCount | None = getattr(args, "workers", None)
    return AUTO if given is None else given


def remote_workers_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--remote-workers",
        type=positive,
        metavar="N",
        help="hand the trials to `errorflow worker` processes on --broker (any machine "
        "that reaches it) instead of running them here: the run starts once N workers "
        "are there (more may join; waits up to --wait seconds); results as one process "
        "gives. The workers need the run key (--key-file or $ERRORFLOW_RUN_KEY), which "
        "never travels; start them with `errorflow worker --broker URL --run RUN_ID` "
        "(or `--run any`)",
    )
    sp.add_argument(
        "--batch-trials",
        type=positive,
        metavar="B",
        help="with --remote-workers: trials per work item (default: about "
        f"{broker_workers.BATCHES_PER_WORKER} items per worker, at most "
        f"{broker_workers.MAX_BATCH} trials each)",
    )


def check_remote_workers(args: argparse.Namespace, scenarios: list[Scenario]) -> None:
    """`--remote-workers` for these runs, checked before anything runs."""
    where = f"--remote-workers {args.remote_workers}"
    if args.broker is None:
        raise UsageError("the workers take trials from a broker: expected --broker URL", where)
    others = [o for o, on in (("--external-agents", args.external_agents),
              ("--baseline", args.baseline), ("--propagation both", args.propagation == "both"),
              ("--workers", args.workers not in (None, 1))) if on]  # fmt: skip
    if others:
        raise UsageError(f"hands one run to workers; it cannot take {others[0]}", where)
    for scenario in scenarios:
        why = broker_workers.refusal(scenario, RunOptions())
        if why is not None:
            raise UsageError(f"{scenario.name} cannot be handed to workers: {why}", where)


def check_workers(args: argparse.Namespace, scenarios: list[Scenario]) -> None:
    """`--workers` for these runs, checked before anything runs: a number > 1 for a run
    that must run in one process is bad input; `auto` on such a large run says why it
    runs in one process."""
    requested = requested_workers(args)
    explicit = getattr(args, "workers", None) is not None
    options = RunOptions(
        broker=broker_of(args.broker), external_agents=getattr(args, "external_agents", False)
    )
    for scenario in scenarios:
        try:
            workers_for(requested, scenario, options)
        except WorkersRefused as exc:
            raise UsageError(str(exc), where=f"--workers {requested}") from None
        why = refusal(scenario, options)
        if explicit and requested == AUTO and scenario.trials >= LARGE_RUN and why is not None:
            say(f"--workers auto: {scenario.name} runs in one process: {why}")
