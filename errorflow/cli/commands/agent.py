"""`errorflow agent`: one agent of a scenario as its own process, joining a run.

It says on stderr what it waits for, and gives up after `--wait-timeout` seconds if no
roll call of the run arrives (a run id that does not exist would keep it forever). Once
joined it never outlives its runner: a runner that died (its last will, then a few
seconds of silence) or that said nothing for `--wait-timeout` seconds makes it leave,
with one line on stderr and exit status 1 (errorflow/runtime/runner_watch.py). The
runner is followed on a connection of its own, so the agent itself is the same code as
the runner's in-process agents. Killed, it is missed by the runner within seconds (its last
will; errorflow/runtime/agent_process.py); started again with the same options within the
runner's grace period, it rejoins the run on the next roll call and is given its
unfinished work again. SIGTERM stops it as Ctrl-C does. An injected crash fault of the
agent (`agents.NAME.faults: [{kind: crash}]`) kills it when it fires: it says so on
stderr and exits with status 70 (`CRASH_EXIT`); the runner waits for a replacement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging

from errorflow.bus.url import BrokerURL
from errorflow.cli.args import nonneg_float, run_id_arg
from errorflow.cli.command_table import summary
from errorflow.cli.console import say
from errorflow.cli.errors import EXIT_OK, RunFailure, UsageError
from errorflow.cli.paths import path_arg
from errorflow.cli.preflight import broker_of
from errorflow.cli.run_keys import agent_key
from errorflow.cli.run_options import scenario_args, scenario_of
from errorflow.cli.signals import interruptible
from errorflow.protocol.control import RollCall
from errorflow.runtime.agent_process import CRASH_EXIT, run_agent_process
from errorflow.runtime.runner_watch import RunnerGone, follow_runner
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import Scenario

DEFAULT_WAIT_S = 300.0


def cmd_agent(args: argparse.Namespace) -> int:
    scenario = scenario_of(args)
    if args.name not in scenario.agents:
        raise UsageError(
            f"no agent of this name in {scenario.name}; expected one of "
            f"{', '.join(scenario.agents)}",
            where=f"--name {args.name}",
        )
    if scenario.services:  # the runner refuses it too: no roll call would ever come
        raise UsageError(
            "its services keep one state for the whole run, which agents in separate "
            "processes cannot share; run it in one process (errorflow run, no "
            "--external-agents)",
            where=scenario.name,
        )
    url = broker_of(args.broker)
    assert url is not None  # required by the parser
    key = agent_key(args.key_file)
    if not args.verbose:
        # The refusal to join is logged there and raised here: say it once.
        logging.getLogger("errorflow.agents.presence").setLevel(logging.CRITICAL)
    say(f"agent {args.name}: waiting for run {args.run} on {url} (roll call)")
    asyncio.run(interruptible(_serve(scenario, args.name, args.run, url, key, args.wait_timeout)))
    return EXIT_OK


async def _serve(
    scenario: Scenario, name: str, run_id: str, url: BrokerURL, key: bytes, wait_s: float
) -> None:
    ours = RunPlan(scenario).for_agent(name).identity  # what its Presence compares

    def joins(roll_call: RollCall) -> bool:
        if identity.agent_view(roll_call.scenario, roll_call.code) != ours:
            return False  # the agent itself refuses, and says why
        say(f"agent {name}: joined run {run_id}")
        return True

    joined = asyncio.Event()
    agent = asyncio.create_task(run_agent_process(scenario, name, run_id, url, run_key=key))
    follow = asyncio.create_task(follow_runner(url, run_id, name, key, joins, wait_s, joined))
    called = asyncio.create_task(joined.wait())
    try:
        done, _ = await asyncio.wait(
            {agent, follow, called}, timeout=wait_s or None, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            raise RunFailure(
                f"agent {name}: no roll call of run {run_id} on {url} after {wait_s:g}s; "
                f"is it started (`errorflow run ... --external-agents --run-id {run_id}`)? "
                "--wait-timeout S waits longer"
            )
        # It serves until the runner stops the run, and leaves if the runner goes away.
        await asyncio.wait({agent, follow}, return_when=asyncio.FIRST_COMPLETED)
        if not agent.done():
            try:
                follow.result()
            except RunnerGone as exc:
                raise RunFailure(f"agent {name}: {exc}; leaving run {run_id}") from None
        await agent  # its result, or why it could not serve
    finally:
        for task in (agent, follow, called):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def add_agent(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    a = sub.add_parser(
        "agent",
        help=summary("agent"),
        description="Run a single agent as its own process. It joins run RUN_ID "
        "on the broker and serves until the runner stops the run. The scenario options "
        "(--set, --trials, --seed, --propagation) must give the runner's scenario. An agent "
        "that stopped can be started again while the runner waits for it (run --grace-s): "
        "it rejoins and is given its unfinished work again. An injected crash fault "
        f"(agents.NAME.faults, kind crash) ends it with exit status {CRASH_EXIT} when it "
        "fires; one started again is the replacement the runner waits for.",
    )
    a.add_argument("scenario", type=path_arg)
    a.add_argument("--name", required=True, help="which agent of the scenario to run")
    a.add_argument("--broker", required=True, metavar="URL", help="mqtt://HOST:PORT")
    a.add_argument(
        "--run", required=True, type=run_id_arg, metavar="RUN_ID", help="the run to join"
    )
    scenario_args(a, ["explicit", "implicit"], "(as given to the runner, which decides)")
    a.add_argument(
        "--key-file",
        type=path_arg,
        metavar="PATH",
        help="the run key the runner printed (default: $ERRORFLOW_RUN_KEY)",
    )
    a.add_argument(
        "--wait-timeout",
        type=nonneg_float,
        default=DEFAULT_WAIT_S,
        metavar="S",
        help=f"give up if the run has not called the roll after S seconds, and leave "
        f"once joined if the runner says nothing for S seconds (default: "
        f"{DEFAULT_WAIT_S:g}; 0 waits for ever; a runner that died is left sooner)",
    )
    a.set_defaults(func=cmd_agent)
