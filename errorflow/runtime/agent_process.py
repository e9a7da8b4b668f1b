"""`errorflow agent`: one agent of a scenario as its own process, joining a run.

Its session carries the agent's last will (`gone`, signed when the session opens) and,
once it has joined, it says `alive` every second (errorflow/agents/presence.py), so the
runner learns within seconds that it went away. Interrupted (Ctrl-C, SIGTERM), it says
`gone` itself: a clean disconnect discards a will. A broker unreachable for
`BROKER_WAIT_S` ends it with one line, before a publish waiting for the broker fails
(the runner gives up on the broker sooner, after its grace period).

An injected crash (`agents.NAME.faults`, kind crash) kills the process as a crash
would, at the model call where it fires: the agent first announces it (an
`agent_crashed` event the runner hears, errorflow/runtime/crashes.py) and says it on
stderr, then exits at once with `CRASH_EXIT`: no result for any trial it held, no
goodbye (its last will tells the broker's other clients it went).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable

from errorflow.agents.agent import Agent
from errorflow.agents.presence import HEARTBEAT_S
from errorflow.bus.mqtt import PUBLISH_OUTAGE_LIMIT_S, MqttBus
from errorflow.bus.transport import offline_s
from errorflow.bus.url import BrokerURL
from errorflow.core.run_pacing import paced_for_run
from errorflow.faults.crash import CrashNotice
from errorflow.models.backends import ConfigurationError, check_backends, check_servers
from errorflow.runtime.participants import make_agent
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario

#: How long an agent waits for a broker that went away before it leaves.
BROKER_WAIT_S = PUBLISH_OUTAGE_LIMIT_S - 10.0
WATCH_S = 0.5
#: The exit status of an agent process an injected crash killed (EX_SOFTWARE).
CRASH_EXIT = 70
#: The longest the crash's announcement may take before the process dies anyway.
ANNOUNCE_S = 5.0

log = logging.getLogger(__name__)


async def run_agent_process(
    scenario: Scenario,
    name: str,
    run_id: str,
    url: BrokerURL,
    *,
    run_key: bytes,
    propagation: str | None = None,
    seed: int | None = None,
) -> None:
    plan = RunPlan.of(scenario, seed=seed, propagation=propagation or None)
    api_key = check_backends(plan.scenario)
    await check_servers(plan.scenario, api_key, only=[name])  # before joining: nothing measured
    bus = MqttBus(url)
    try:
        conn = bus.open(f"{run_id}-{name}")
        agent = make_agent(plan, name, run_id, conn, run_key=run_key, api_key=api_key)
        agent.backends.on_crash = ProcessCrash(agent)
        conn.will = agent.presence.will  # signed by the agent for each session it opens
        await agent.kit.world.work_out_truths()  # before joining: not on its first trial
        await conn.start()
        with paced_for_run():  # as a run's own process paces it (core/run_pacing)
            await serve(agent)
        if agent.mismatch:
            raise ConfigurationError(agent.mismatch)
    finally:
        await bus.close()


async def serve(agent: Agent, heartbeat_s: float = HEARTBEAT_S) -> None:
    """Run the agent, with its heartbeat, until the runner stops it; leave when the
    broker has been unreachable for `BROKER_WAIT_S`."""
    presence, conn = agent.presence, agent.endpoint.conn
    work = asyncio.create_task(agent.run(), name=f"agent-{agent.name}")
    beat = asyncio.create_task(presence.heartbeat(heartbeat_s), name=f"heartbeat-{agent.name}")
    try:
        while not work.done():
            await asyncio.wait({work}, timeout=WATCH_S)
            if not work.done() and offline_s(conn) > BROKER_WAIT_S:
                raise ConnectionError(
                    f"agent {agent.name}: the broker has been unreachable for "
                    f"{BROKER_WAIT_S:g}s; leaving run {agent.run_id}"
                )
        work.result()
    finally:
        for task in (beat, work):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if offline_s(conn) == 0:  # else the broker has our will (or nobody hears)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(presence.gone(), timeout=5)


class ProcessCrash:
    """What an injected crash does to an agent in a process of its own: it announces the
    crash (`agent_crashed`, with `process: true`), then the process dies (`exit`)."""

    def __init__(self, agent: Agent, exit: Callable[[int], object] = os._exit) -> None:
        self.agent, self.exit = agent, exit

    async def __call__(self, notice: CrashNotice) -> None:
        agent = self.agent
        event = notice.event(process=True)
        trace_id = f"{agent.run_id}-t{notice.trial}"  # the runner's trace of the trial
        try:
            await asyncio.wait_for(
                agent.endpoint.publish_event(notice.trial, trace_id, event), ANNOUNCE_S
            )
        except (ConnectionError, TimeoutError) as exc:  # it dies all the same
            log.warning("agent %s: the crash was not announced: %s", agent.name, exc)
        print(
            f"agent {agent.name}: {notice}: the process dies (exit {CRASH_EXIT})",
            file=sys.stderr,
            flush=True,
        )
        self.exit(CRASH_EXIT)
        await asyncio.Event().wait()  # an `exit` that returns (a test's): never come back
