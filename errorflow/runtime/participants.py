"""The participants of a run as the runner sees them: the agents (started here or joining
from processes of their own), the broker behind the runner's connections, the recorder.

They are called to the roll until every agent is present; while the trials run they are
watched (errorflow/runtime/liveness.py), a missing agent called again every second and,
when it comes back restarted, given the inputs of its unfinished work again. `watch`
returns who was lost for good; `shut_down` stops them all (agents finish and say bye,
the recorder hears the end).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Mapping

from pydantic import JsonValue

from errorflow.agents.agent import Agent, OnTrace
from errorflow.agents.presence import HEARTBEAT_S
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.transport import Bus, Connection, offline_s
from errorflow.core.outside_time import OUTSIDE, process_token
from errorflow.core.redact import redact
from errorflow.models.api_keys import ApiKeys
from errorflow.models.backends import BackendFactory
from errorflow.protocol import topics
from errorflow.protocol.control import (
    Alive,
    End,
    Gone,
    Hello,
    RollCall,
    Stop,
    parse_control,
)
from errorflow.protocol.envelope import Envelope
from errorflow.runtime.liveness import Liveness, Lost
from errorflow.runtime.recorder import Recorder
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec import identity
from errorflow.world.services import ServiceRegistry
from errorflow.world.tool_world import ToolWorld

log = logging.getLogger(__name__)

#: How often the runner looks at its participants, and calls the roll for a missing one.
WATCH_TICK_S = 0.25
ROLL_CALL_EVERY_S = 1.0
#: The longest a shutdown message (stop, end) may take: the run is over either way.
SAY_S = 5.0
#: How long a call an agent's heartbeat said was outside counts as still there: until
#: its next heartbeat, twice over.
TOLD_FOR_S = 2.5 * HEARTBEAT_S


def make_agent(
    plan: RunPlan,
    name: str,
    run_id: str,
    conn: Connection,
    *,
    run_key: bytes,
    api_key: ApiKeys | None = None,
    on_trace: OnTrace | None = None,
    services: ServiceRegistry | None = None,
    truths: Mapping[str, JsonValue] | None = None,
) -> Agent:
    """The agent `name` of the run, given only its part of the plan, its tool world and
    its model backends. `services`: the run's, shared by the agents of this process (a
    scenario without services needs none, and agents in other processes refuse one:
    errorflow.runtime.runner); None makes the agent's own. `truths`: the task's ground
    truth as the runner worked it out (None: the agent's world works it out)."""
    mine = plan.for_agent(name)
    backends = BackendFactory(mine.spec.model, plan.seed, name, api_key, scenario=plan.scenario)
    world = ToolWorld(plan.scenario, services, truths)
    return Agent(mine, world, backends, run_id, conn, run_key=run_key, on_trace=on_trace)


class Participants:
    """Who takes part in a run, whether they are there, and what to do when they go."""

    def __init__(
        self,
        plan: RunPlan,
        run_id: str,
        bus: Bus,
        options: RunOptions,
        key: bytes,
        tracker: TrialTracker,
        recording: Connection,
    ) -> None:
        self.plan, self.run_id, self.bus, self.options = plan, run_id, bus, options
        self.key, self.tracker = key, tracker
        self.agents = set(plan.scenario.agents)
        self.present: set[str] = set()
        self.present_all = asyncio.Event()
        # Agents in processes say `alive`; in-process ones are watched as tasks.
        self.liveness = Liveness(
            options.grace_s, silence_s=options.silence_s, heartbeats=options.external_agents
        )
        self.agent_tasks: dict[str, asyncio.Task[None]] = {}
        self._replays: set[asyncio.Task[None]] = set()
        self.endpoint: Endpoint | None = None  # the runner's, once it has started
        self.conns: list[Connection] = [recording]  # closed when the run ends, whoever owns the bus

    async def connect(self, client_id: str) -> Connection:
        conn = await self.bus.connect(client_id)
        self.conns.append(conn)
        return conn

    async def start_agents(
        self,
        api_key: ApiKeys | None,
        services: ServiceRegistry,
        truths: Mapping[str, JsonValue] | None = None,
    ) -> list[asyncio.Task[None]]:
        """The agents, in this process: each on a connection of its own, subscribed
        before this returns (the roll call that follows finds them all listening), with
        the run's ground truth (`truths`) when the runner has it."""
        agents = [
            make_agent(
                self.plan,
                name,
                self.run_id,
                await self.connect(f"{self.run_id}-{name}"),
                run_key=self.key,
                api_key=api_key,
                on_trace=self.options.on_trace,
                services=services,
                truths=truths,
            )
            for name in self.plan.scenario.agents
        ]
        try:
            await asyncio.gather(*(agent.open() for agent in agents))
        except BaseException:  # none runs: stop what the others started
            for agent in agents:
                await agent.endpoint.close()
            raise
        tasks = []
        for agent in agents:
            task = asyncio.create_task(agent.run(), name=f"agent-{agent.name}")
            self.agent_tasks[agent.name] = task
            tasks.append(task)
        return tasks

    @functools.cached_property
    def roll_call(self) -> RollCall:
        """What every roll call of the run says: its public scenario, its code's digests
        (made when first called: a run of in-process agents calls none)."""
        return RollCall(scenario=identity.public(self.plan.scenario), code=self.plan.code)

    async def await_presence(self) -> None:
        assert self.endpoint is not None
        deadline = time.monotonic() + self.options.presence_timeout_s
        interval = 0.05  # agents started a moment ago may miss the first call: call again soon
        # observers that attach (the TUI) learn the run's scenario from the roll call
        while not self.present_all.is_set():
            await self.endpoint.control(self.roll_call, trace="presence")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self.present_all.wait()
            interval = min(1.0, interval * 2)
            if time.monotonic() > deadline and not self.present_all.is_set():
                missing = sorted(self.agents - self.present)
                raise TimeoutError(
                    f"agents not present after {self.options.presence_timeout_s:g}s: "
                    f"{', '.join(missing)} (start them with `errorflow agent ... --run "
                    f"{self.run_id}`)"
                )

    async def watch(self, recorder: Recorder) -> Lost:
        """Look at every participant until one is lost for good, and say who. Meanwhile
        call the roll every second while an agent is missing, so it can rejoin."""
        called = -ROLL_CALL_EVERY_S
        while True:
            await asyncio.sleep(WATCH_TICK_S)
            now = time.monotonic()
            lost = self._lost_here(recorder, now)
            newly, agent_lost = self.liveness.check(now)
            for name in newly:
                log.warning(
                    "agent %s: %s; waiting up to %gs for it to come back",
                    name,
                    self.liveness.why(name),
                    self.options.grace_s,
                )
            found = lost or agent_lost
            if found is not None:
                return found
            if self.liveness.suspects and now - called >= ROLL_CALL_EVERY_S:
                called = now
                await self._call_roll()

    def _lost_here(self, recorder: Recorder, now: float) -> Lost | None:
        """The participants the runner sees itself: the broker (through its own
        connections), the recorder and in-process agents (tasks that must not end)."""
        if recorder.failure is not None:  # nothing more can be stored: stop now
            return Lost("the store", str(recorder.failure))
        if recorder.stopped is not None:
            return Lost("the recorder", f"the recorder stopped ({recorder.stopped})")
        for name, task in self.agent_tasks.items():
            if task.done():
                exc = None if task.cancelled() else task.exception()
                why = redact(f"{type(exc).__name__}: {exc}")[:200] if exc else "it ended"
                return Lost(f"agent {name}", f"agent {name} stopped ({why})")
        offline = max(offline_s(conn) for conn in self.conns)
        if offline > 0:
            self.liveness.deaf(now)  # nobody can be heard: silence does not count
        if offline > self.options.grace_s:
            return Lost(
                "the broker",
                f"the broker ({self.bus.description}) has been unreachable for "
                f"{self.options.grace_s:g}s (the grace period)",
            )
        return None

    async def _call_roll(self) -> None:
        """The roll call again (a missing agent answers it when it is back)."""
        assert self.endpoint is not None
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout(ROLL_CALL_EVERY_S):
                await self.endpoint.control(self.roll_call, trace="presence")

    async def _replay(self, agent: str) -> None:
        """A restarted agent lost the work it held: give it those inputs again, as they
        were (same ids: a copy it did get is a duplicate)."""
        assert self.endpoint is not None
        targets = frozenset(self.plan.scenario.result_targets(agent))
        lost = self.tracker.lost_inputs(agent, targets)
        log.warning(
            "agent %s is back (a new process): %d inputs of its unfinished trials sent again",
            agent,
            len(lost),
        )
        topic = topics.inbox(self.run_id, agent)
        for env in lost:
            with contextlib.suppress(ConnectionError):
                await self.endpoint.conn.publish(topic, env.encode(self.key))

    def control(self, env: Envelope) -> None:
        """An agent's control message: hello (present; back after a restart), alive, gone."""
        if env.sender not in self.agents:
            return
        control = parse_control(env.payload)
        now = time.monotonic()
        if isinstance(control, Hello):
            if self.liveness.join(env.sender, control.session, now):
                task = asyncio.create_task(self._replay(env.sender), name="runner-replay")
                self._replays.add(task)
                task.add_done_callback(self._replays.discard)
            self.present.add(env.sender)
            if self.present >= self.agents:
                self.present_all.set()
        elif isinstance(control, Alive):
            self.liveness.alive(env.sender, control.session, now)
            source = control.outside_from or env.sender
            if source != process_token():  # (this process's calls are counted here already)
                for t in control.outside:  # its trials' time outside errorflow
                    OUTSIDE.told(source, t.trace_id, t.spent_s, t.waiting, for_s=TOLD_FOR_S)
        elif isinstance(control, Gone) and self.liveness.gone(env.sender, control.session, now):
            log.warning(
                "agent %s left without a goodbye (its last will); waiting up to %gs for it "
                "to come back",
                env.sender,
                self.options.grace_s,
            )
        else:
            self.liveness.seen(env.sender, now)

    async def shut_down(
        self,
        ep: Endpoint,
        recorder: Recorder,
        agents: list[asyncio.Task[None]],
        reader: asyncio.Task[None],
    ) -> None:
        """Stop (agents finish and say bye), end (the recorder's cue), then close. With
        the broker unreachable nobody would hear it: agents and recorder just stop."""
        for task in list(self._replays):
            task.cancel()
        reachable = max(offline_s(conn) for conn in self.conns) == 0
        if reachable:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ep.control(Stop(), trace="control"), SAY_S)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ep.control(End(), trace="control"), SAY_S)
                await recorder.wait_ended(stall_s=10)
        else:
            await recorder.stop()
        if agents:
            _, waiting = await asyncio.wait(agents, timeout=5 if reachable else 0)
            for task in waiting:
                task.cancel()
            await asyncio.wait(agents, timeout=SAY_S)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await ep.close()
        recorder.settle_held()
        await recorder.flush()
        for conn in self.conns:
            await conn.close()
