"""`errorflow agent`: one agent of a scenario as its own process, joining a run.

It says on stderr what it waits for, and gives up after `--wait-timeout` seconds if no
roll call of the run arrives (a run id that does not exist would keep it forever). The
wait is watched on a connection of its own, so the agent itself is the same code as the
runner's in-process agents. Killed, it is missed by the runner within seconds (its last
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

from errorflow.bus import topics
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.mqtt import MqttBus
from errorflow.bus.url import BrokerURL
from errorflow.cli.args import nonneg_float
from errorflow.cli.commands import summary
from errorflow.cli.console import say
from errorflow.cli.errors import EXIT_OK, RunFailure, UsageError
from errorflow.cli.preflight import broker_of
from errorflow.cli.run_keys import agent_key
from errorflow.cli.run_options import scenario_args, scenario_of
from errorflow.cli.signals import interruptible
from errorflow.core.control import RollCall, parse_control
from errorflow.runtime.agent_process import CRASH_EXIT, run_agent_process
from errorflow.scenario import identity
from errorflow.scenario.model import Scenario

DEFAULT_WAIT_S = 300.0


def cmd_agent(args: argparse.Namespace) -> int:
    scenario = scenario_of(args)
    if args.name not in scenario.agents:
        raise UsageError(
            f"no agent of this name in {scenario.name}; expected one of "
            f"{', '.join(scenario.agents)}",
            where=f"--name {args.name}",
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
    agent = asyncio.create_task(run_agent_process(scenario, name, run_id, url, run_key=key))
    called = asyncio.create_task(_roll_call(scenario, name, run_id, url, key))
    try:
        done, _ = await asyncio.wait(
            {agent, called}, timeout=wait_s or None, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            raise RunFailure(
                f"agent {name}: no roll call of run {run_id} on {url} after {wait_s:g}s; "
                f"is it started (`errorflow run ... --external-agents --run-id {run_id}`)? "
                "--wait-timeout S waits longer"
            )
        await agent  # serves until the runner stops the run (or raises why it cannot)
    finally:
        for task in (agent, called):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _roll_call(
    scenario: Scenario, name: str, run_id: str, url: BrokerURL, key: bytes
) -> None:
    """Return on the runner's first (valid, signed) roll call of the run."""
    bus = MqttBus(url)
    try:
        conn = await bus.connect(f"{run_id}-{name}-wait")
        await conn.subscribe(topics.control(run_id, topics.RUNNER))
        endpoint = Endpoint(conn, run_id, f"{name}-wait", {topics.RUNNER}, key=key)
        async for topic, raw in conn.messages():
            env = endpoint.check(topic, raw)
            control = parse_control(env.payload) if env is not None else None
            if isinstance(control, RollCall):
                ours = identity.agent_view(identity.public(scenario))
                if identity.agent_view(control.scenario) == ours:  # else the agent refuses
                    say(f"agent {name}: joined run {run_id}")
                return
    finally:
        await bus.close()


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
    a.add_argument("scenario")
    a.add_argument("--name", required=True, help="which agent of the scenario to run")
    a.add_argument("--broker", required=True, metavar="URL", help="mqtt://HOST:PORT")
    a.add_argument("--run", required=True, metavar="RUN_ID", help="the run to join")
    scenario_args(a, ["explicit", "implicit"], "(as given to the runner, which decides)")
    a.add_argument(
        "--key-file",
        metavar="PATH",
        help="the run key the runner printed (default: $ERRORFLOW_RUN_KEY)",
    )
    a.add_argument(
        "--wait-timeout",
        type=nonneg_float,
        default=DEFAULT_WAIT_S,
        metavar="S",
        help=f"give up if the run has not called the roll after S seconds "
        f"(default: {DEFAULT_WAIT_S:g}; 0 waits for ever)",
    )
    a.set_defaults(func=cmd_agent)
