"""The runner: starts (or joins) the bus, the recorder and the agents, publishes one task
per trial, collects the final results, scores them and stores everything.

Order of a run: every real model server checked (`InfrastructureError` before anything
is stored) → recorder subscribed → agents subscribed and present (roll call and hello
on the control topics) → tasks published, at most `max_in_flight` trials at once → each
trial ends when every terminal agent's result and everything it was derived from has
arrived (the `TrialTracker` rule; `bus_fault` on timeout) → stop, end, flush.

A trial whose model server failed during the run is `infra_fault`: stored and counted
(`RunResult.infra_faults`), never scored.

Liveness, while the trials run (errorflow/runtime/liveness.py): the runner watches every
participant. An agent process that goes away (its last will, or silence) is waited for
`grace_s`, with a roll call every second; one that comes back restarted is given the
inputs of its unfinished work again, so its trials end as they would have. The broker
unreachable for `grace_s`, the recorder or an in-process agent stopping end the run at
once. A run that ends so stops cleanly: the trials in flight are `infra_fault` with the
reason, the run is left interrupted (`--resume` reruns them) and `ParticipantLost` says
what happened in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from errorflow.agents.agent import Agent, OnTrace
from errorflow.bus.broker import EmbeddedBroker
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.mqtt import PUBLISH_OUTAGE_LIMIT_S, MqttBus
from errorflow.bus.seen_seqs import CompactSeenSet
from errorflow.bus.transport import Bus, Connection, offline_s
from errorflow.bus.url import BrokerURL
from errorflow.core.redact import redact
from errorflow.faults.agent import AgentFaultTally
from errorflow.faults.tool_tally import ToolFaultTally
from errorflow.models.api_keys import ApiKeys
from errorflow.models.backends import check_backends, check_servers
from errorflow.protocol import signing, topics
from errorflow.protocol.control import (
    Alive,
    End,
    Gone,
    Hello,
    RollCall,
    Stop,
    parse_control,
)
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.events import (
    AgentCrashed,
    LabelEvent,
    TrialOutcomeEvent,
    parse_event,
)
from errorflow.protocol.result import infra_reason
from errorflow.protocol.task import TaskPayload
from errorflow.runtime.bus_fault_tally import BusFaultTally, bus_recovery
from errorflow.runtime.crashes import (
    crash_reason,
    crash_score,
    crash_watched,
    what,
)
from errorflow.runtime.liveness import (
    DEFAULT_GRACE_S,
    SILENCE_S,
    Liveness,
    Lost,
    ParticipantLost,
    taken_by_lost,
)
from errorflow.runtime.recorder import Recorder
from errorflow.runtime.runner_presence import runner_endpoint
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.problems import file_error
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.run_time import arrival, arrival_times
from errorflow.scoring.score import (
    Outcome,
    TrialScore,
    Truth,
    score_trial,
)
from errorflow.scoring.score_table import in_trial_order, score_map
from errorflow.scoring.service_load import ServiceJson, service_load
from errorflow.scoring.summary import RunJson, RunSummary, summarize
from errorflow.store import root_causes
from errorflow.store.database import (
    DEFAULT_DB,
    LabelRow,
    MessageRow,
    StoreFailed,
    TrialRow,
    create_run,
    finish_run,
    load_scores,
    open_db,
    resume_run,
    stopped_by,
)
from errorflow.world.services import ServiceRegistry

log = logging.getLogger(__name__)

#: How often the runner looks at its participants, and calls the roll for a missing one.
WATCH_TICK_S = 0.25
#: A trial starts only while the recorder is at most this many messages behind, and the
#: lane looks again every `RECORDER_WAIT_S` (`_recorder_caught_up`).
RECORDER_LAG_LIMIT = 5_000
RECORDER_WAIT_S = 0.01
ROLL_CALL_EVERY_S = 1.0
#: The longest a shutdown message (stop, end) may take: the run is over either way.
SAY_S = 5.0


@dataclass
class RunOptions:
    trials: int | None = None
    seed: int | None = None
    propagation: str | None = None
    broker: BrokerURL | None = None  # None: start the embedded broker
    bus: Bus | None = None  # a ready bus (tests, in-process sweeps); overrides broker
    db_path: Path = DEFAULT_DB
    run_id: str | None = None
    external_agents: bool = False  # agents are `errorflow agent` processes
    resume: bool = False  # run_id names an interrupted run: finish its missing trials
    keep_messages: bool = True  # RunResult.messages; off for long runs (memory stays flat)
    presence_timeout_s: float = 30.0
    trial_timeout_s: float = 120.0
    # How long a participant (an agent, the broker) that went away is waited for before
    # the run ends; an agent restarted meanwhile rejoins.
    grace_s: float = DEFAULT_GRACE_S
    silence_s: float = SILENCE_S  # an agent process silent this long is missed
    group_id: str | None = None  # several runs of one comparison or sweep
    label: str | None = None  # this run's arm or cell within its group
    on_trial: Callable[[TrialScore], None] | None = None
    on_trace: OnTrace | None = None
    # The run key that signs every envelope of the run (None: a fresh one). It never
    # travels on the bus; `errorflow agent` processes get it from a file or the env.
    run_key: bytes | None = None
    # A shard of the run (errorflow.runtime.workers): only these trial numbers run here.
    only_trials: tuple[int, ...] | None = None


@dataclass
class RunResult:
    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    broker: str
    scores: Sequence[TrialScore]  # in trial order (a lazy view on long runs)
    summary: RunSummary
    rejects: dict[str, int] = field(default_factory=dict)
    messages: dict[int, list[Envelope]] = field(default_factory=dict)
    #: Load on each service (errorflow.scoring.service_load); empty without services.
    services: dict[str, ServiceJson] = field(default_factory=dict)
    #: Bus faults fired per trial, by kind (only trials where some fired).
    bus_faults: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def outcomes(self) -> dict[str, int]:
        return dict(self.summary["outcomes"])

    @property
    def infra_faults(self) -> int:
        """Trials the infrastructure failed (not scored): a run with any measured less
        than it was asked to."""
        return sum(1 for s in self.scores if s.outcome is Outcome.INFRA_FAULT)

    @property
    def infra_reasons(self) -> list[str]:
        """The distinct reasons of the infra-fault trials, in trial order."""
        reasons = (s.reason for s in self.scores if s.outcome is Outcome.INFRA_FAULT)
        return list(dict.fromkeys(reasons))

    def to_json(self) -> RunJson:
        doc: RunJson = {
            "run_id": self.run_id,
            "scenario": self.scenario,
            "seed": self.seed,
            "trials": self.trials,
            "propagation": self.propagation,
            "broker": self.broker,
            "outcomes": self.summary["outcomes"],
            "metrics": self.summary["metrics"],
            "rejects": self.rejects,
        }
        if self.services:
            doc["services"] = self.services
        if "bus_faults" in self.summary:
            doc["bus_faults"] = self.summary["bus_faults"]
        if "agent_faults" in self.summary:
            doc["agent_faults"] = self.summary["agent_faults"]
        if "tool_faults" in self.summary:
            doc["tool_faults"] = self.summary["tool_faults"]
        if "bus_recovery" in self.summary:
            doc["bus_recovery"] = self.summary["bus_recovery"]
        return doc


def new_run_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def configure(scenario: Scenario, options: RunOptions) -> Scenario:
    return with_settings(
        scenario, trials=options.trials, seed=options.seed, propagation=options.propagation
    )


async def run_scenario(scenario: Scenario, options: RunOptions | None = None) -> RunResult:
    options = options or RunOptions()
    scenario = configure(scenario, options)
    if options.external_agents and scenario.services:
        raise file_error(
            scenario.name,
            "services keep one state for the whole run, shared by the agents that call "
            "them, which agents in separate processes cannot share; run it without "
            "--external-agents",
        )
    api_key = check_backends(scenario)
    if not options.external_agents:
        # External agents may reach servers this process cannot: they check their own.
        await check_servers(scenario, api_key)
    run_id = options.run_id or new_run_id(scenario.name)
    async with contextlib.AsyncExitStack() as stack:
        bus = options.bus if options.bus is not None else await _start_bus(stack, options)
        # The first connection before the run row: a broker that is down fails here,
        # with nothing stored (no run left `interrupted` by a run that never started).
        recording = await bus.connect(f"{run_id}-recorder")
        stack.push_async_callback(recording.close)  # closing twice is harmless
        db = await open_db(options.db_path)
        stack.push_async_callback(db.close)
        runner = _Runner(scenario, run_id, bus, db, options, api_key, recording)
        if options.resume:
            await resume_run(db, run_id)
        else:
            await register(db, run_id, scenario, bus.description, options, runner.truth)
        stack.push_async_callback(runner.drain)  # runs before the database closes
        if options.resume:
            runner.resume_from(load_scores(options.db_path, run_id))
        status = "interrupted"
        try:
            result = await runner.run()
            status = "finished"
        except ParticipantLost:
            if runner.store_failure() is None:
                raise  # else the store's failure is what ended the run: said below
        finally:
            summary = runner.summary()
            await runner.drain()  # one writer at a time on the connection
            failed = runner.store_failure()
            if failed is not None:
                status = "interrupted"  # `--resume` runs what was not stored
            await root_causes.record(db, run_id, finished=status == "finished")
            # A store that failed may take this last word or not: it was said once.
            with contextlib.suppress(StoreFailed) if failed else contextlib.nullcontext():
                await finish_run(db, run_id, status, summary)
        if failed is not None:
            raise await stopped_by(db, options.db_path, run_id, scenario.trials, failed)
        return result


async def _start_bus(stack: contextlib.AsyncExitStack, options: RunOptions) -> Bus:
    """An MQTT bus on the broker the options name, or on an embedded one started here."""
    url = options.broker
    description = str(url) if url else ""
    if url is None:
        broker = EmbeddedBroker()
        url = await broker.start()
        stack.push_async_callback(broker.stop)
        description = f"embedded amqtt at {url}"
    # A publish waits for the broker longer than the grace period: the runner's watch,
    # not a failed publish, decides that the broker is gone.
    wait_s = options.grace_s + PUBLISH_OUTAGE_LIMIT_S
    bus = MqttBus(url, description=description, publish_wait_s=wait_s)
    stack.push_async_callback(bus.close)
    return bus


async def register(
    db: aiosqlite.Connection,
    run_id: str,
    scenario: Scenario,
    broker: str,
    options: RunOptions,
    truth: Truth | None = None,
) -> None:
    """A new run's row: the scenario as it is stored (public form, sha), where it runs
    (`broker`: the bus's description), its sweep group and label, and its ground truth
    (`truth`, if the caller has it at hand: computing it may call Python tools)."""
    truth = truth if truth is not None else Truth(scenario)
    await create_run(
        db,
        run_id=run_id,
        scenario=scenario.name,
        scenario_json=identity.public_json(scenario),
        scenario_sha=identity.sha(scenario),
        scenario_exact=identity.is_exact(scenario),
        truth_json=json.dumps(truth.values),
        seed=scenario.seed,
        trials=scenario.trials,
        propagation=scenario.propagation,
        broker=broker,
        group_id=options.group_id,
        label=options.label,
    )


class _Runner:
    """The run's async driver. When a trial is over is the tracker's rule; the runner
    keeps one future per trial in flight and resolves it when the tracker says done."""

    def __init__(
        self,
        scenario: Scenario,
        run_id: str,
        bus: Bus,
        db: aiosqlite.Connection,
        options: RunOptions,
        api_key: ApiKeys | None,
        recording: Connection,
    ) -> None:
        self.scenario, self.run_id, self.bus, self.db = scenario, run_id, bus, db
        self.options, self.api_key = options, api_key
        self.key = options.run_key if options.run_key is not None else signing.new_key()
        self.members = set(scenario.agents) | {topics.RUNNER}
        self.truth = Truth(scenario)
        # The services behind the tools, shared by the in-process agents (and read for
        # the run's load figures).
        self.services = ServiceRegistry(scenario)
        self.tracker = TrialTracker(scenario.terminal_agents())
        bus_plan = scenario.bus.plan(scenario.seed, scenario.time_scale)
        self.bus_faults = BusFaultTally(bus_plan, self.tracker)
        self.agent_faults = AgentFaultTally(scenario.agents)
        self.tool_faults = ToolFaultTally(scenario.tools, scenario.task.needs, scenario.seed)
        self.done: dict[int, asyncio.Future[None]] = {}  # trials in flight
        # Without kept messages the labels are in the store only, and the scores are
        # kept by column (a few bytes a trial: memory stays flat over long runs).
        self.scores = score_map(options.keep_messages, scenario.trials)
        self.kept: dict[int, list[Envelope]] = {}  # scored trials' messages (keep_messages)
        self.present: set[str] = set()
        self.present_all = asyncio.Event()
        # Agents in processes say `alive`; in-process ones are watched as tasks.
        self.liveness = Liveness(
            options.grace_s, silence_s=options.silence_s, heartbeats=options.external_agents
        )
        self.agent_tasks: dict[str, asyncio.Task[None]] = {}
        self._replays: set[asyncio.Task[None]] = set()
        #: Scores of the trials an agent process's injected crash took (until `_trial`
        #: stores them), and how many it took in all.
        self.crashed: dict[int, TrialScore] = {}
        self.crash_taken = 0
        self.recorder: Recorder | None = None
        self.endpoint: Endpoint | None = None
        self.recording = recording  # the recorder's, connected before the run was registered
        self.conns: list[Connection] = [recording]  # closed when the run ends, whoever owns the bus

    def resume_from(self, scores: dict[int, TrialScore]) -> None:
        """Trials an interrupted run already scored: not run again, late copies ignored.
        Those a lost participant took with it measured nothing: they run again."""
        kept = {t: sc for t, sc in scores.items() if not taken_by_lost(sc)}
        self.scores.update(kept)
        for trial in kept:
            self.tracker.close(trial)

    async def run(self) -> RunResult:
        s = self.scenario
        self.recorder = Recorder(
            self.db,
            self.recording,
            self.run_id,
            self.members,
            agents=set(s.agents),
            key=self.key,
        )
        await self.recorder.start()
        ep, presence = await runner_endpoint(  # with its last will: agents leave if it dies
            self.bus,
            f"{self.run_id}-runner",
            lambda c: Endpoint(c, self.run_id, topics.RUNNER, self.members, key=self.key,
                               faults=s.bus.plan(s.seed, s.time_scale)),
        )  # fmt: skip
        self.endpoint, conn = ep, ep.conn
        self.conns.append(conn)
        ep.seen = CompactSeenSet()  # it hears every result of the run: flat in memory
        if self.bus_faults.active:  # their events end trials and are counted
            await conn.subscribe(f"{topics.ROOT}/{self.run_id}/events/+")
        elif self.options.external_agents:  # a crashed agent process says so there
            for name in crash_watched(s):
                await conn.subscribe(topics.events(self.run_id, name))
        await conn.subscribe(f"{topics.ROOT}/{self.run_id}/inbox/+")
        await conn.subscribe(topics.control_filter(self.run_id))
        await ep.start()
        reader = asyncio.create_task(self._read(), name="runner-reader")
        if self.options.external_agents:  # its silence tells them it is gone
            presence.start_heartbeat()
        agents: list[asyncio.Task[None]] = []
        lost: Lost | None = None
        try:
            if not self.options.external_agents:
                agents = await self._start_agents()
            await self._await_presence()
            lost = await self._run_trials()
        finally:
            await presence.stop_heartbeat()
            await self._shut_down(ep, self.recorder, agents, reader)
        if lost is not None:
            in_flight = sum(1 for sc in self.scores.values() if sc.reason == lost.reason)
            not_run = s.trials - len(self.scores)
            raise ParticipantLost(lost, self.run_id, in_flight, not_run, self.crash_taken)
        summary = self.summary()
        return RunResult(
            run_id=self.run_id,
            scenario=s.name,
            seed=s.seed,
            trials=s.trials,
            propagation=s.propagation,
            broker=self.bus.description,
            scores=self.ordered_scores(),
            summary=summary,
            rejects=dict(self.recorder.rejects),
            messages=self.kept,
            services=summary.get("services", {}),
            bus_faults=self.bus_faults.fired,
        )

    async def _start_agents(self) -> list[asyncio.Task[None]]:
        tasks = []
        for name in self.scenario.agents:
            agent = Agent(
                name,
                self.scenario,
                self.run_id,
                await self._connect(f"{self.run_id}-{name}"),
                run_key=self.key,
                api_key=self.api_key,
                on_trace=self.options.on_trace,
                services=self.services,
            )
            task = asyncio.create_task(agent.run(), name=f"agent-{name}")
            self.agent_tasks[name] = task
            tasks.append(task)
        return tasks

    async def _run_trials(self) -> Lost | None:
        """Every trial not scored yet, `max_in_flight` at once, while the watch finds
        every participant there; None when they are all done, else who was lost (the
        trials in flight are then marked with the reason)."""
        # State that lives across trials (services, run-scoped breakers) is reproducible
        # only when each trial sees the trials before it complete: one at a time.
        in_flight = 1 if self.scenario.run_scoped else self.scenario.max_in_flight
        wanted = self.options.only_trials
        numbers = range(self.scenario.trials) if wanted is None else wanted
        # `in_flight` lanes, each starting the next trial not started when its last one
        # is over: trials start in order, and a run of any length holds `in_flight`
        # coroutines (not one per trial: waiting tasks would cost memory per trial).
        todo = (t for t in numbers if t not in self.scores)  # --resume

        async def lane() -> None:
            for trial in todo:
                await self._recorder_caught_up()
                await self._trial(trial)

        trials: asyncio.Future[list[None]] = asyncio.gather(*(lane() for _ in range(in_flight)))
        watch = asyncio.create_task(self._watch(), name="runner-watch")
        both: set[asyncio.Future[Any]] = {trials, watch}
        try:
            over, _ = await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
        finally:  # cancelled (Ctrl-C) or one of them over: the other stops too
            for task in both:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*both, return_exceptions=True)
        if trials in over:
            trials.result()  # a trial's own failure, if any, is the run's
            return None
        lost = watch.result()
        self._abandon(lost)
        return lost

    async def _recorder_caught_up(self) -> None:
        """Back-pressure from the store: the next trial waits while the recorder is far
        behind. In-process the bounded queues hold the publishers back; an aiomqtt
        connection cannot stop paho reading, so there a recorder slower than the run (its
        writes slow down as the database grows) would hold the difference in memory,
        growing with the run."""
        recorder = self.recorder
        while recorder is not None and recorder.backlog() > RECORDER_LAG_LIMIT:
            await asyncio.sleep(RECORDER_WAIT_S)

    def _abandon(self, lost: Lost) -> None:
        """The trials in flight when a participant was lost: infra faults, with why."""
        for trial in sorted(set(self.done) - set(self.scores)):
            score = self.crashed.pop(trial, None) or TrialScore(
                trial, Outcome.INFRA_FAULT, 0, reason=lost.reason
            )
            self._finish(score)
            if self.options.on_trial is not None:
                self.options.on_trial(score)

    async def _watch(self) -> Lost:
        """Look at every participant until one is lost for good, and say who. Meanwhile
        call the roll every second while an agent is missing, so it can rejoin."""
        called = -ROLL_CALL_EVERY_S
        while True:
            await asyncio.sleep(WATCH_TICK_S)
            now = time.monotonic()
            lost = self._lost_here(now)
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

    def _lost_here(self, now: float) -> Lost | None:
        """The participants the runner sees itself: the broker (through its own
        connections), the recorder and in-process agents (tasks that must not end)."""
        assert self.recorder is not None
        if self.recorder.failure is not None:  # nothing more can be stored: stop now
            return Lost("the store", str(self.recorder.failure))
        if self.recorder.stopped is not None:
            return Lost("the recorder", f"the recorder stopped ({self.recorder.stopped})")
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
        roll_call = RollCall(scenario=identity.public(self.scenario))
        with contextlib.suppress(ConnectionError, TimeoutError):
            await asyncio.wait_for(
                self.endpoint.control(roll_call, trace="presence"), ROLL_CALL_EVERY_S
            )

    async def _replay(self, agent: str) -> None:
        """A restarted agent lost the work it held: give it those inputs again, as they
        were (same ids: a copy it did get is a duplicate)."""
        assert self.endpoint is not None
        spec = self.scenario.agents[agent]
        lost = self.tracker.lost_inputs(agent, frozenset(spec.sends_to or [topics.RUNNER]))
        log.warning(
            "agent %s is back (a new process): %d inputs of its unfinished trials sent again",
            agent,
            len(lost),
        )
        topic = topics.inbox(self.run_id, agent)
        for env in lost:
            with contextlib.suppress(ConnectionError):
                await self.endpoint.conn.publish(topic, env.encode(self.key))

    async def _shut_down(
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
        await recorder.flush()
        for conn in self.conns:
            await conn.close()

    async def _connect(self, client_id: str) -> Connection:
        conn = await self.bus.connect(client_id)
        self.conns.append(conn)
        return conn

    async def _await_presence(self) -> None:
        assert self.endpoint is not None
        deadline = time.monotonic() + self.options.presence_timeout_s
        interval = 0.05  # agents started a moment ago may miss the first call: call again soon
        # observers that attach (the TUI) learn the run's scenario from the roll call
        roll_call = RollCall(scenario=identity.public(self.scenario))
        while not self.present_all.is_set():
            await self.endpoint.control(roll_call, trace="presence")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.present_all.wait(), timeout=interval)
            interval = min(1.0, interval * 2)
            if time.monotonic() > deadline and not self.present_all.is_set():
                missing = sorted(set(self.scenario.agents) - self.present)
                raise TimeoutError(
                    f"agents not present after {self.options.presence_timeout_s:g}s: "
                    f"{', '.join(missing)} (start them with `errorflow agent ... --run "
                    f"{self.run_id}`)"
                )

    async def _trial(self, trial: int) -> None:
        assert self.endpoint is not None
        fut = self.done.setdefault(trial, asyncio.get_running_loop().create_future())
        trace_id = f"{self.run_id}-t{trial}"
        task = self.scenario.task
        for name in self.scenario.entry_agents():
            env = await self.endpoint.send(
                kind=Kind.TASK,
                recipient=name,
                trial=trial,
                trace_id=trace_id,
                payload=TaskPayload(redact(task.prompt), tuple(n.id for n in task.needs)).to_wire(),
                at=arrival(self.scenario, trial) if self.scenario.run_scoped else 0.0,
            )
            # The results may have been filed while the send awaited its ack: then this
            # task is what completes the trial.
            if self.tracker.add(env):
                self._resolve(trial)
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.options.trial_timeout_s)
            messages = self.tracker.messages(trial)
            score = (
                self.crashed.pop(trial, None)
                or self.bus_faults.score(trial)
                or score_trial(self.scenario, self.truth, trial, messages)
            )
        except TimeoutError:
            score = self._timed_out(trial)
        self._finish(score)
        with contextlib.suppress(ConnectionError):
            await self._publish_labels(score)
        if self.options.on_trial is not None:
            self.options.on_trial(score)

    def _timed_out(self, trial: int) -> TrialScore:
        """A trial without its final result: a bus fault, unless a message that did come
        says the infrastructure failed it."""
        infra = infra_reason(self.tracker.messages(trial))
        if infra is not None:
            return TrialScore(trial, Outcome.INFRA_FAULT, 0, reason=infra)
        timeout = self.options.trial_timeout_s
        reason = self.bus_faults.timeout_reason(trial, f"no final result within {timeout:g}s")
        return TrialScore(trial, Outcome.BUS_FAULT, 0, reason=reason)

    def _finish(self, score: TrialScore) -> None:
        """A scored trial: its rows go to the store, its state goes (memory stays flat
        over long runs), and later copies of its messages are ignored."""
        assert self.recorder is not None
        trial = score.trial
        self.scores[trial] = score
        state = self.tracker.close(trial)
        self.bus_faults.finish(trial, state)
        self.agent_faults.finish(trial, state.messages)
        self.tool_faults.finish(trial, state.messages)
        messages = state.messages
        self.done.pop(trial, None)
        self.recorder.add_trial(
            TrialRow.from_score(self.run_id, score),
            [LabelRow.from_label(self.run_id, trial, lb) for lb in score.labels],
        )
        self._backfill(messages)
        if self.options.keep_messages:
            self.kept[trial] = messages

    async def _read(self) -> None:
        assert self.endpoint is not None
        async for env in self.endpoint.receive():
            try:
                self._file(env)
            except Exception as exc:  # one message never stops the runner
                self.endpoint.handler_failed(env, exc)

    def _file(self, env: Envelope) -> None:
        if env.kind is Kind.CONTROL:
            self._control(env)
            return
        if env.kind is Kind.EVENT:  # only with bus or crash faults (subscribed then)
            self._crashed_process(env)
            self._resolve(self.bus_faults.file(env))
            return
        self.liveness.seen(env.sender, time.monotonic())
        if env.kind is not Kind.RESULT and not (
            env.kind is Kind.TASK and env.sender != topics.RUNNER
        ):
            return  # the runner's own tasks are filed when it sends them
        if self.tracker.add(env):
            self._resolve(env.trial)

    def _resolve(self, trial: int | None) -> None:
        """The trial is over: its `_trial` scores it."""
        fut = self.done.get(trial) if trial is not None else None
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _crashed_process(self, env: Envelope) -> None:
        """An agent process announced its injected crash (it dies next): the trials it
        held are scored as such now, and it is suspect until a replacement joins
        (errorflow/runtime/crashes.py)."""
        event = parse_event(env.payload)
        if not isinstance(event, AgentCrashed) or not event.process or event.agent != env.sender:
            return
        agent, struck = env.sender, env.trial
        self.liveness.crashed(agent, f"it {what(event, struck)}", time.monotonic())
        targets = frozenset(self.scenario.agents[agent].sends_to or [topics.RUNNER])
        held = sorted({m.trial for m in self.tracker.lost_inputs(agent, targets)} | {struck})
        held = [t for t in held if t in self.done and t not in self.crashed]
        for trial in held:
            base = score_trial(self.scenario, self.truth, trial, self.tracker.messages(trial))
            self.crashed[trial] = crash_score(base, crash_reason(event, struck, trial))
            self._resolve(trial)
        self.crash_taken += len(held)
        log.warning(
            "agent %s %s; its process died, %d trials it held scored as injected crashes; "
            "waiting up to %gs for a replacement (`errorflow agent ... --name %s`)",
            agent,
            what(event, struck),
            len(held),
            self.options.grace_s,
            agent,
        )

    def _control(self, env: Envelope) -> None:
        if env.sender not in self.scenario.agents:
            return
        control = parse_control(env.payload)
        now = time.monotonic()
        if isinstance(control, Hello):
            if self.liveness.join(env.sender, control.session, now):
                task = asyncio.create_task(self._replay(env.sender), name="runner-replay")
                self._replays.add(task)
                task.add_done_callback(self._replays.discard)
            self.present.add(env.sender)
            if self.present >= set(self.scenario.agents):
                self.present_all.set()
        elif isinstance(control, Alive):
            self.liveness.alive(env.sender, control.session, now)
        elif isinstance(control, Gone) and self.liveness.gone(env.sender, control.session, now):
            log.warning(
                "agent %s left without a goodbye (its last will); waiting up to %gs for it "
                "to come back",
                env.sender,
                self.options.grace_s,
            )
        else:
            self.liveness.seen(env.sender, now)

    async def _publish_labels(self, score: TrialScore) -> None:
        """Labels and the outcome of a trial, as events, as soon as it is scored."""
        assert self.endpoint is not None
        trace_id = f"{self.run_id}-t{score.trial}"
        for lb in score.labels:
            label = LabelEvent(
                message_id=lb.message_id, agent=lb.sender, label=lb.label.value, reason=lb.reason
            )
            await self.endpoint.publish_event(score.trial, trace_id, label)
        outcome = TrialOutcomeEvent(
            outcome=score.outcome.value, depth=score.depth, reason=score.reason
        )
        await self.endpoint.publish_event(score.trial, trace_id, outcome)

    def _backfill(self, messages: list[Envelope]) -> None:
        """Every task and result the runner holds reaches the store, even if the recorder
        missed it during a broker outage (INSERT OR IGNORE: nothing twice)."""
        assert self.recorder is not None
        now = time.time()
        self.recorder.add_messages(
            [
                MessageRow.from_envelope(
                    m, topics.for_message(self.run_id, m.kind, m.sender, m.recipient), now
                )
                for m in messages
            ]
        )

    async def drain(self) -> None:
        if self.recorder is not None:
            await self.recorder.drain()

    def store_failure(self) -> StoreFailed | None:
        return self.recorder.failure if self.recorder is not None else None

    def ordered_scores(self) -> Sequence[TrialScore]:
        return in_trial_order(self.scores)

    def summary(self) -> RunSummary:
        scores = self.ordered_scores()
        summary = summarize(scores)
        bus_faults = self.bus_faults.counts()
        if bus_faults is not None:
            summary["bus_faults"] = bus_faults
            summary["bus_recovery"] = bus_recovery(self.bus_faults.fired, self.scores)
        agent_faults = self.agent_faults.counts()
        if agent_faults is not None:
            summary["agent_faults"] = agent_faults
        tool_faults = self.tool_faults.counts()
        if tool_faults is not None:
            summary["tool_faults"] = tool_faults
        if self.services.services:
            summary["services"] = service_load(self.services, scores, arrival_times(self.scenario))
        return summary
