"""The runner: starts (or joins) the bus, the recorder and the agents, publishes one task
per trial, collects the final results, scores them and stores everything.

Order of a run: every real model server checked (`InfrastructureError` before anything
is stored) → recorder subscribed → agents subscribed and present (roll call and hello
on the control topics) → tasks published, at most `max_in_flight` trials at once → each
trial ends when every terminal agent's result and everything it was derived from has
arrived (the `TrialTracker` rule; `bus_fault` on timeout) → stop, end, flush.

A trial whose model server failed during the run is `infra_fault`: stored and counted
(`RunResult.infra_faults`), never scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite

from errorflow.agents.agent import Agent, OnTrace
from errorflow.agents.backends import check_backends, check_servers
from errorflow.agents.propagation import infra_reason
from errorflow.bus import signing, topics
from errorflow.bus.broker import EmbeddedBroker
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.envelope import Envelope, Kind
from errorflow.bus.mqtt import MqttBus
from errorflow.bus.transport import Bus, Connection
from errorflow.bus.url import BrokerURL
from errorflow.core.control import End, Hello, RollCall, Stop, parse_control
from errorflow.core.events import LabelEvent, TrialOutcomeEvent
from errorflow.runtime.recorder import Recorder
from errorflow.runtime.store import (
    DEFAULT_DB,
    LabelRow,
    MessageRow,
    StoreError,
    TrialRow,
    create_run,
    finish_run,
    load_scores,
    open_db,
    resume_run,
)
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario import identity
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import with_settings
from errorflow.scoring.score import Outcome, TrialScore, Truth, score_trial
from errorflow.scoring.summary import RunJson, RunSummary, summarize

log = logging.getLogger(__name__)


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
    group_id: str | None = None  # several runs of one comparison or sweep
    label: str | None = None  # this run's arm or cell within its group
    on_trial: Callable[[TrialScore], None] | None = None
    on_trace: OnTrace | None = None
    # The run key that signs every envelope of the run (None: a fresh one). It never
    # travels on the bus; `errorflow agent` processes get it from a file or the env.
    run_key: bytes | None = None


@dataclass
class RunResult:
    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    broker: str
    scores: list[TrialScore]
    summary: RunSummary
    rejects: dict[str, int] = field(default_factory=dict)
    messages: dict[int, list[Envelope]] = field(default_factory=dict)

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
        return {
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


def new_run_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def configure(scenario: Scenario, options: RunOptions) -> Scenario:
    return with_settings(
        scenario, trials=options.trials, seed=options.seed, propagation=options.propagation
    )


async def run_scenario(scenario: Scenario, options: RunOptions | None = None) -> RunResult:
    options = options or RunOptions()
    scenario = configure(scenario, options)
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
        if options.resume:
            await resume_run(db, run_id)
        else:
            await _register(db, run_id, scenario, bus, options)
        runner = _Runner(scenario, run_id, bus, db, options, api_key, recording)
        stack.push_async_callback(runner.drain)  # runs before the database closes
        if options.resume:
            runner.resume_from(load_scores(options.db_path, run_id))
        status = "interrupted"
        try:
            result = await runner.run()
            status = "finished"
        finally:
            summary = runner.summary()
            await runner.drain()  # one writer at a time on the connection
            failed = runner.recorder.write_error if runner.recorder else None
            if failed is not None:
                status = "interrupted"  # `--resume` refills what was not stored
            await finish_run(db, run_id, status, summary)
        if failed is not None:
            raise StoreError(
                f"run {run_id}: the store lost rows ({failed}); the run is "
                f"marked interrupted: `errorflow run --resume {run_id}`"
            )
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
    bus = MqttBus(url, description=description)
    stack.push_async_callback(bus.close)
    return bus


async def _register(
    db: aiosqlite.Connection, run_id: str, scenario: Scenario, bus: Bus, options: RunOptions
) -> None:
    await create_run(
        db,
        run_id=run_id,
        scenario=scenario.name,
        scenario_json=identity.public_json(scenario),
        scenario_sha=identity.sha(scenario),
        scenario_exact=identity.is_exact(scenario),
        seed=scenario.seed,
        trials=scenario.trials,
        propagation=scenario.propagation,
        broker=bus.description,
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
        api_key: str | None,
        recording: Connection,
    ) -> None:
        self.scenario, self.run_id, self.bus, self.db = scenario, run_id, bus, db
        self.options, self.api_key = options, api_key
        self.key = options.run_key if options.run_key is not None else signing.new_key()
        self.members = set(scenario.agents) | {topics.RUNNER}
        self.truth = Truth(scenario)
        self.tracker = TrialTracker(scenario.terminal_agents())
        self.done: dict[int, asyncio.Future[None]] = {}  # trials in flight
        self.scores: dict[int, TrialScore] = {}
        self.kept: dict[int, list[Envelope]] = {}  # scored trials' messages (keep_messages)
        self.present: set[str] = set()
        self.present_all = asyncio.Event()
        self.recorder: Recorder | None = None
        self.endpoint: Endpoint | None = None
        self.recording = recording  # the recorder's, connected before the run was registered
        self.conns: list[Connection] = [recording]  # closed when the run ends, whoever owns the bus

    def resume_from(self, scores: dict[int, TrialScore]) -> None:
        """Trials an interrupted run already scored: not run again, late copies ignored."""
        self.scores.update(scores)
        for trial in scores:
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
        conn = await self._connect(f"{self.run_id}-runner")
        self.endpoint = ep = Endpoint(conn, self.run_id, topics.RUNNER, self.members, key=self.key)
        await conn.subscribe(f"{topics.ROOT}/{self.run_id}/inbox/+")
        await conn.subscribe(topics.control_filter(self.run_id))
        await ep.start()
        reader = asyncio.create_task(self._read(), name="runner-reader")
        agents: list[asyncio.Task[None]] = []
        try:
            if not self.options.external_agents:
                agents = await self._start_agents()
            await self._await_presence()
            gate = asyncio.Semaphore(s.max_in_flight)
            todo = [t for t in range(s.trials) if t not in self.scores]  # --resume skips
            await asyncio.gather(*(self._trial(t, gate) for t in todo))
        finally:
            await self._shut_down(ep, self.recorder, agents, reader)
        return RunResult(
            run_id=self.run_id,
            scenario=s.name,
            seed=s.seed,
            trials=s.trials,
            propagation=s.propagation,
            broker=self.bus.description,
            scores=[self.scores[t] for t in sorted(self.scores)],
            summary=self.summary(),
            rejects=dict(self.recorder.rejects),
            messages=self.kept,
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
            )
            tasks.append(asyncio.create_task(agent.run(), name=f"agent-{name}"))
        return tasks

    async def _shut_down(
        self,
        ep: Endpoint,
        recorder: Recorder,
        agents: list[asyncio.Task[None]],
        reader: asyncio.Task[None],
    ) -> None:
        """Stop (agents finish and say bye), end (the recorder's cue), then close."""
        with contextlib.suppress(Exception):
            await ep.control(Stop(), trace="control")
        with contextlib.suppress(Exception):
            await ep.control(End(), trace="control")
            await recorder.wait_ended(stall_s=10)
        if agents:
            _, waiting = await asyncio.wait(agents, timeout=5)
            for task in waiting:
                task.cancel()
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

    async def _trial(self, trial: int, gate: asyncio.Semaphore) -> None:
        assert self.endpoint is not None
        async with gate:
            fut = self.done.setdefault(trial, asyncio.get_running_loop().create_future())
            trace_id = f"{self.run_id}-t{trial}"
            task = self.scenario.task
            for name in self.scenario.entry_agents():
                env = await self.endpoint.send(
                    kind=Kind.TASK,
                    recipient=name,
                    trial=trial,
                    trace_id=trace_id,
                    payload={"prompt": task.prompt, "needs": [n.id for n in task.needs]},
                )
                self.tracker.add(env)
            try:
                await asyncio.wait_for(asyncio.shield(fut), self.options.trial_timeout_s)
                messages = self.tracker.messages(trial)
                score = score_trial(self.scenario, self.truth, trial, messages)
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
        return TrialScore(
            trial, Outcome.BUS_FAULT, 0, reason=f"no final result within {timeout:g}s"
        )

    def _finish(self, score: TrialScore) -> None:
        """A scored trial: its rows go to the store, its state goes (memory stays flat
        over long runs), and later copies of its messages are ignored."""
        assert self.recorder is not None
        trial = score.trial
        self.scores[trial] = score
        messages = self.tracker.close(trial).messages
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
        if env.kind is not Kind.RESULT and not (
            env.kind is Kind.TASK and env.sender != topics.RUNNER
        ):
            return  # the runner's own tasks are filed when it sends them
        if self.tracker.add(env):
            fut = self.done.get(env.trial)
            if fut is not None and not fut.done():
                fut.set_result(None)

    def _control(self, env: Envelope) -> None:
        if isinstance(parse_control(env.payload), Hello) and env.sender in self.scenario.agents:
            self.present.add(env.sender)
            if self.present >= set(self.scenario.agents):
                self.present_all.set()

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

    def summary(self) -> RunSummary:
        return summarize([self.scores[t] for t in sorted(self.scores)])
