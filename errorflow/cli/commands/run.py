"""`errorflow run`: run a scenario's trials (one run, both arms, or against a baseline).

The scenario a command runs is the file, then its `--set` overrides, then the run
settings (`--trials`, `--seed`, `--propagation`), checked as `validate` checks a file
(errorflow/cli/scenario_input.py); the runner is handed the scenario ready and no
settings. What can be checked before the run starts is (errorflow/cli/preflight.py),
so bad input leaves nothing in the store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import pathlib
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from rich.text import Text

from errorflow.bus.url import BrokerURL
from errorflow.cli.args import run_id_arg, wait_seconds
from errorflow.cli.command_table import summary
from errorflow.cli.commands.compare_real import run_compare
from errorflow.cli.commands.export import otlp_url, span_time, span_time_option
from errorflow.cli.console import out, say
from errorflow.cli.errors import (
    EXIT_OK,
    Interrupted,
    RunFailure,
    UsageError,
)
from errorflow.cli.live_otlp import LiveOtlp
from errorflow.cli.paths import path_arg
from errorflow.cli.preflight import broker_of, run_id_is_new, writable_db
from errorflow.cli.progress import Bars, progress_bars, wanted
from errorflow.cli.resume import Source, resumable, resumable_group, resume_hint
from errorflow.cli.run_keys import runner_key
from errorflow.cli.run_options import (
    check_remote_workers,
    check_workers,
    grace_option,
    remote_workers_option,
    requested_workers,
    run_options,
    scenario_of,
    scenario_options,
    trial_timeout_option,
    workers_option,
)
from errorflow.cli.signals import Terminated, interruptible
from errorflow.cli.spend import (
    arms_of,
    check_spend,
    print_traffic,
    traffic_doc,
)
from errorflow.protocol.signing import KEY_ENV
from errorflow.reports.policy_table import policy_table
from errorflow.reports.profile_lines import profile_lines, profiles_doc
from errorflow.reports.service_table import service_table
from errorflow.reports.tables import (
    baseline_line,
    paired_table,
    policy_title,
    print_fault_lines,
    print_run,
    shown,
)
from errorflow.runtime import broker_workers, runner, workers
from errorflow.runtime.experiment import (
    Arm,
    ArmJson,
    ExperimentResult,
    propagation_arms,
    run_arms,
)
from errorflow.runtime.liveness import ParticipantLost
from errorflow.runtime.run_options import RunOptions
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.summary import RunJson
from errorflow.store.failures import StoreError
from errorflow.store.opening import UnwritableStore
from errorflow.world.tool_catalog import ToolCatalog

log = logging.getLogger(__name__)


def new_group_id(scenario: Scenario) -> str:
    """A group id as `run_arms` makes one (made here, so an interrupted run is found)."""
    return f"{scenario.name}-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def resume_on_failure(
    db: str,
    run_ids: list[str],
    group_id: str | None,
    source: Source | None = None,
    group_options: str | None = None,
) -> Iterator[None]:
    """Ctrl-C or SIGTERM, a participant lost for good, or a store that lost rows,
    leaves a run interrupted: say how to resume it (`source`: the scenario argument and
    `--set` options, which a run whose stored scenario is redacted needs again;
    `group_options`: a command that makes a group resumes it whole, with these)."""

    def hint() -> str:
        return resume_hint(db, run_ids, group_id, source, group_options)

    try:
        yield
    except KeyboardInterrupt as exc:
        what = "interrupted (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        raise Interrupted(what + hint()) from None
    except (ParticipantLost, workers.ShardFailed) as exc:
        raise RunFailure(str(exc) + hint()) from None
    except broker_workers.NoWorkers as exc:  # before the run was stored
        raise RunFailure(str(exc)) from None
    except StoreError as exc:
        if isinstance(exc, UnwritableStore):
            raise
        # The runner's own hint does not know the --db this command was given.
        said = re.sub(r":? *`errorflow run --resume [^`]*`", "", str(exc)).rstrip(": ")
        raise RunFailure(said + hint()) from None


# -- run ----------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    if args.compare_real:
        return run_compare(args, _scenario_to_run(args))
    _refuse_combinations(args)
    scenario, resumed_group = _scenario_and_group(args)
    ToolCatalog.of(scenario)  # its MCP tools against their servers, before any arm
    both = args.propagation == "both"
    if check_spend(args, arms_of(scenario, both), args.baseline):
        return EXIT_OK  # --dry-run: the estimate is printed, nothing ran
    check_workers(args, [a.scenario for a in arms_of(scenario, both)])
    if args.remote_workers:
        check_remote_workers(args, [scenario])
    writable_db(args.db)
    run_id_is_new(args.db, args.run_id)
    broker = broker_of(args.broker)  # a broker that is down fails before the run is stored
    key = runner_key(args.key_file, args.external_agents)
    group_id = resumed_group or (new_group_id(scenario) if both or args.baseline else None)
    run_id = args.resume or args.run_id or (None if group_id else runner.new_run_id(scenario.name))
    remote = _remote(args, broker, key, run_id)
    steps = ["explicit", "implicit"] if both else []
    log.debug("run %s of %s: store %s, broker %s", run_id or group_id, scenario.name, args.db,
              broker or "embedded")  # fmt: skip  # BrokerURL: its password shows as ***
    ours = [run_id] if run_id else []
    source = Source.of(args)
    live = _live_export(args, run_id or group_id)
    with (
        live or contextlib.nullcontext(),
        progress_bars(args) as progress,
        resume_on_failure(args.db, ours, group_id, source, _group_options(args)),
    ):
        bars = Bars(progress, steps, unit="arm", log=wanted(args))
        options = run_options(
            args,
            bars,
            run_id=run_id,
            resume=bool(args.resume),
            external_agents=args.external_agents,
            run_key=key,
        )
        started = time.perf_counter()
        if both:
            arms = run_arms(
                propagation_arms(scenario),
                options,
                baseline=args.baseline,
                group_id=group_id,
                on_arm=bars.start,
                workers=requested_workers(args),
                continuing=resumed_group is not None,
            )
            result = asyncio.run(interruptible(arms))
        else:
            count, going_on = requested_workers(args), resumed_group is not None
            one = _run_once(RunPlan(scenario), options, bars, group_id, count, remote, going_on)
            once = asyncio.run(interruptible(one))
        wall = time.perf_counter() - started
    if live is not None:
        say(live.said())
    if both:
        _print_paired(args, scenario, result, wall)
        once = Measured(result.arms[0].to_json(), result.infra_faults, result.infra_reasons)
    elif args.json:
        doc = {**once.data, "wall_seconds": round(wall, 3), **traffic_doc(args)}
        print(json.dumps({**doc, "profiles": profiles_doc(scenario)}, indent=2))
    else:
        print_run(out, once.data)
        print_profiles(scenario)
        out.print(f"wall time {wall:.2f}s")
    print_traffic(args)
    refuse_infra_faults(once.infra_faults, once.infra_reasons)
    return EXIT_OK


def _scenario_and_group(args: argparse.Namespace) -> tuple[Scenario, str | None]:
    """The scenario to run, and the group `--resume GROUP` names (its runs are each
    read back, resumed or begun: `args.resume` is then cleared)."""
    resumed = resumable_group(args) if args.resume else None
    if resumed is not None:
        args.resume = None
        return resumed
    return (resumable(args) if args.resume else _scenario_to_run(args)), None


def _group_options(args: argparse.Namespace) -> str | None:
    """What a command that makes a group of runs is resumed with (None: it makes one
    run, resumed by its id)."""
    options = " --propagation both" if args.propagation == "both" else ""
    options += " --baseline" if args.baseline else ""
    return options or None


def _live_export(args: argparse.Namespace, ident: str | None) -> LiveOtlp | None:
    """With `--otlp URL`: the trials sent as the run stores them (errorflow.cli.live_otlp)."""
    if not args.otlp or ident is None:
        return None
    return LiveOtlp(pathlib.Path(args.db), ident, args.otlp, span_time(args))


@dataclass(frozen=True)
class Measured:
    """A run's results, and the trials the infrastructure failed (not outcomes)."""

    data: RunJson
    infra_faults: int
    infra_reasons: list[str]


def refuse_infra_faults(count: int, reasons: list[str]) -> None:
    """Results are printed, but a command whose infrastructure failed some trials has
    measured less than it was asked to: it fails (exit code 1), saying why in one line."""
    if count:
        why = f": {reasons[0]}" + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")
        raise RunFailure(f"{count} trials hit an infrastructure fault, not counted{why}")


def _refuse_combinations(args: argparse.Namespace) -> None:
    others = args.external_agents or args.run_id
    if args.resume and others:
        raise UsageError(
            "continues a run of this process; it cannot take --run-id or --external-agents",
            where="--resume",
        )
    if args.baseline and others:
        raise UsageError(
            "runs the scenario twice under new ids; it cannot take --run-id or --external-agents",
            where="--baseline",
        )
    if args.propagation == "both" and others:
        raise UsageError(
            "runs two arms itself; it cannot take --external-agents or --run-id",
            where="--propagation both",
        )
    if args.baseline and getattr(args, "no_faults", False):
        raise UsageError(
            "runs the fault-free scenario beside the run; with --no-faults the run is that "
            "scenario already",
            where="--baseline",
        )
    if args.span_time is not None and not args.otlp:
        raise UsageError("is for the traces --otlp URL sends", where="--span-time")


def _remote(
    args: argparse.Namespace, broker: BrokerURL | None, key: bytes | None, run_id: str | None
) -> broker_workers.Remote | None:
    """With --remote-workers: where the trials are handed out, said on stderr."""
    if not args.remote_workers:
        return None
    assert broker is not None  # checked: --broker is required
    if key is None:
        raise UsageError(
            f"the workers need the run key: expected --key-file PATH (created if missing) "
            f"or {KEY_ENV}",
            where=f"--remote-workers {args.remote_workers}",
        )
    say(f"run {run_id}: waiting for {args.remote_workers} `errorflow worker --broker URL "
        f"--run {run_id}` (or --run any) on {broker}, given the run key")  # fmt: skip
    return broker_workers.Remote(
        broker, ready=args.remote_workers, batch_trials=args.batch_trials, wait_s=args.wait
    )


def _scenario_to_run(args: argparse.Namespace) -> Scenario:
    if args.scenario is None:
        raise UsageError("name a scenario to run (or --resume RUN_ID)", where="errorflow run")
    return scenario_of(args)


async def _run_once(
    plan: RunPlan,
    options: RunOptions,
    bars: Bars,
    group_id: str | None,
    count: workers.WorkerCount = 1,
    remote: broker_workers.Remote | None = None,
    continuing: bool = False,
) -> Measured:
    """One run; with a group, measured against the same run without faults
    (`continuing`: the group's interrupted runs resumed, its finished ones read back)."""
    scenario = plan.scenario
    if group_id is not None:
        arm = Arm(scenario.propagation, plan)
        result = await run_arms(
            [arm],
            options,
            group_id=group_id,
            on_arm=bars.start,
            workers=count,
            continuing=continuing,
        )
        return Measured(result.arms[0].to_json(), result.infra_faults, result.infra_reasons)
    bars.start(scenario.name, scenario)
    if remote is not None:
        run = await broker_workers.run(plan, options, remote)
        return Measured(run.to_json(), run.infra_faults, run.infra_reasons)
    run = await workers.run(plan, options, count)
    return Measured(run.to_json(), run.infra_faults, run.infra_reasons)


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
            **traffic_doc(args),
            "profiles": profiles_doc(scenario),
        }
        print(json.dumps(doc, indent=2))
        return
    out.print(
        f"[bold]{shown(scenario.name)}[/]  group {shown(result.group_id)}  "
        f"seed {scenario.seed}  trials {scenario.trials}  explicit vs implicit propagation"
    )
    out.print(paired_table(arms_json, paired))
    for label, arm in arms_json.items():
        policy = arm["metrics"].get("policy")
        if policy:
            out.print(policy_table(policy, policy_title(arm, label)))
        services = arm.get("services")
        if services:
            out.print(service_table(services, title=f"Services ({label})"))
    for label, arm in arms_json.items():
        print_fault_lines(out, arm, label)
    if args.baseline:
        for label, arm in arms_json.items():
            base = arm.get("baseline_outcomes")
            if base:
                out.print(Text(baseline_line(base, label)), highlight=False)
        out.print(Text(amplification_line(arms_json)), highlight=False)
    print_profiles(scenario)
    out.print(f"wall time {wall:.2f}s")


def print_profiles(scenario: Scenario) -> None:
    for line in profile_lines(scenario):
        out.print(Text(line), highlight=False)


def amplification_line(arms: dict[str, ArmJson]) -> str:
    """`amplification vs fault-free baseline (backend × / model ×): explicit 1.26/1.00, ...`"""
    cells = []
    for label, arm in arms.items():
        amp = arm.get("amplification")
        b, m = (amp["backend_calls"], amp["model_calls"]) if amp else (None, None)
        cells.append(f"{label} {_times(b)}/{_times(m)}")
    return "amplification vs fault-free baseline (backend × / model ×): " + ", ".join(cells)


def _times(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


# -- the parser ----------------------------------------------------------------------------


def add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser(
        "run",
        help=summary("run"),
        description="Run a scenario: start the recorder and the agents (in this process, on "
        "an in-process bus, or on --broker), run the trials, print outcomes with 95% "
        "intervals.",
    )
    r.add_argument(
        "scenario", nargs="?", type=path_arg, help="scenario file or bundled scenario name"
    )
    scenario_options(r, ["explicit", "implicit", "both"], "to run")
    r.add_argument(
        "--otlp",
        type=otlp_url,
        metavar="URL",
        help="send each trial as an OpenTelemetry trace to this OTLP/HTTP receiver while "
        "the run goes on (the otel extra; headers from OTEL_EXPORTER_OTLP_HEADERS)",
    )
    span_time_option(r)
    r.add_argument(
        "--baseline",
        action="store_true",
        help="also run the scenario with every fault removed (same seeds) and print its "
        "outcomes and the backend-call and model-call amplification against it",
    )
    r.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="finish the missing trials of an interrupted run (same seed, same settings; "
        "a unique prefix of its id is enough)",
    )
    r.add_argument("--run-id", type=run_id_arg, help="run id to use (default: generated)")
    r.add_argument(
        "--external-agents",
        action="store_true",
        help="do not start agents; wait for `errorflow agent` processes to join "
        "(give them the run key: --key-file)",
    )
    r.add_argument(
        "--key-file",
        type=path_arg,
        metavar="PATH",
        help="the run key that signs the run's messages: read from PATH, or written there "
        "(owner-only) when missing (default: $ERRORFLOW_RUN_KEY, else a fresh key)",
    )
    r.add_argument(
        "--wait",
        type=wait_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for all agents (with --remote-workers: the workers) to be "
        "present (default: 30)",
    )
    grace_option(r)
    trial_timeout_option(r)
    workers_option(r)
    remote_workers_option(r)
    r.add_argument(
        "--compare-real",
        action="store_true",
        help="run the scenario with its real models and with their simulation (--profile) "
        "on the same trials, seeds and faults, and print per outcome and per agent both "
        "rates and their paired difference with its 95%% interval",
    )
    r.add_argument(
        "--profile",
        metavar="P",
        help="with --compare-real: the simulated model's profile (a built-in's name or a "
        "profile file errorflow calibrate wrote)",
    )
    r.set_defaults(func=cmd_run)
