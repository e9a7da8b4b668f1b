"""The run's driver: publishes one task per trial, at most `max_in_flight` at once, files
every message the runner hears, resolves a trial when the tracker says it is over
(`TrialTracker`; `bus_fault` on timeout), scores it, stores its rows and publishes its
labels; while the trials run, its participants (errorflow/runtime/participants.py) are
watched, and a lost one ends the run with the trials in flight marked `infra_fault`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.seen_seqs import CompactSeenSet
from errorflow.bus.transport import Bus, Connection, hears_all
from errorflow.core.outside_time import OUTSIDE
from errorflow.core.redact import redact
from errorflow.models.api_keys import ApiKeys
from errorflow.protocol import signing, topics
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.events import (
    AgentCrashed,
    Event,
    LabelEvent,
    TrialOutcomeEvent,
    parse_event,
)
from errorflow.protocol.result import Readings, infra_reason
from errorflow.protocol.task import TaskPayload
from errorflow.runtime.bus_fault_tally import BusFaultTally, bus_recovery
from errorflow.runtime.crashes import (
    crash_reason,
    crash_score,
    crash_watched,
    what,
)
from errorflow.runtime.liveness import Lost, ParticipantLost
from errorflow.runtime.participants import Participants
from errorflow.runtime.recorder import Recorder
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.run_result import RunResult
from errorflow.runtime.runner_presence import runner_endpoint
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.run_time import arrival, arrival_times
from errorflow.scoring.result_tallies import ResultTallies
from errorflow.scoring.score import (
    Outcome,
    TrialScore,
    Truth,
    score_trial,
)
from errorflow.scoring.score_table import in_trial_order, score_map
from errorflow.scoring.service_load import service_load
from errorflow.scoring.summary import UNCOSTED, RunSummary, summarize
from errorflow.store.failures import StoreFailed
from errorflow.store.kept_trials import count_kept, kept_rejects, kept_trials
from errorflow.store.rows import LabelRow, TrialRow
from errorflow.store.trial_causes import TrialCauses
from errorflow.store.trial_store import RunMeta
from errorflow.world.services import ServiceRegistry

log = logging.getLogger(__name__)

#: A trial starts only while the recorder is at most this many messages behind, and the
#: lane looks again every `RECORDER_WAIT_S` (`_recorder_caught_up`).
RECORDER_LAG_LIMIT = 5_000
RECORDER_WAIT_S = 0.01
#: While a trial's call is outside past its deadline, the deadline is looked at again
#: this often (`_deadline_after_waits`).
OUTSIDE_RECHECK_S = 1.0


class RunDriver:
    """The run's async driver. When a trial is over is the tracker's rule; the runner
    keeps one future per trial in flight and resolves it when the tracker says done."""

    def __init__(
        self,
        plan: RunPlan,
        run_id: str,
        bus: Bus,
        db: aiosqlite.Connection,
        options: RunOptions,
        api_key: ApiKeys | None,
        recording: Connection,
        truth: Truth,
    ) -> None:
        """`truth`: the task's ground truth (worked out before: it may call slow tools)."""
        scenario = plan.scenario
        self.plan, self.scenario = plan, scenario
        self.run_id, self.bus, self.db = run_id, bus, db
        self.options, self.api_key = options, api_key
        self.key = options.run_key if options.run_key is not None else signing.new_key()
        self.members = set(scenario.agents) | {topics.RUNNER}
        self.truth = truth
        # The services behind the tools, shared by the in-process agents (and read for
        # the run's load figures).
        self.services = ServiceRegistry(scenario)
        self.tracker = TrialTracker(scenario.terminal_agents())
        bus_plan = scenario.bus.plan(scenario.seed, scenario.time_scale)
        self.bus_faults = BusFaultTally(bus_plan, self.tracker)
        self.result_faults = ResultTallies(scenario)
        self.done: dict[int, asyncio.Future[None]] = {}  # trials in flight
        # Without kept messages the labels are in the store only, and the scores are
        # kept by column (a few bytes a trial: memory stays flat over long runs).
        self.scores = score_map(options.keep_messages, scenario.trials)
        self._summary: tuple[int, RunSummary] | None = None  # (scores summarized, summary)
        self.kept: dict[int, list[Envelope]] = {}  # scored trials' messages (keep_messages)
        self.kept_rejects: Counter[str] = Counter()  # rejected before a `--resume`
        #: Scores of the trials an agent process's injected crash took (until `_trial`
        #: stores them), and how many it took in all.
        self.crashed: dict[int, TrialScore] = {}
        self.crash_taken = 0
        self.crash_struck: dict[int, str] = {}  # the trial a crash fired in: its agent
        self.recorder: Recorder | None = None
        self.endpoint: Endpoint | None = None
        self.recording = recording  # the recorder's, connected before the run was registered
        self.participants = Participants(
            plan, run_id, bus, options, self.key, self.tracker, recording
        )
        self.liveness = self.participants.liveness

    def resume_from(self, scores: dict[int, TrialScore], path: Path) -> None:
        """Trials an interrupted run keeps (`runner.take_over_stored`): not run
        again, late copies ignored, and counted again from the store at `path` (what
        fired in them, their policy decisions)."""
        bus = self.bus_faults.tally if self.bus_faults.active else None
        rows = kept_trials(path, self.run_id, scores)
        self.scores.update(count_kept(rows, scores, self.result_faults, bus))
        self.kept_rejects = kept_rejects(path, self.run_id)
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
            causes=TrialCauses(RunMeta(self.run_id, s.name, str(s.propagation), s.trials)),
        )
        await self.recorder.start()
        ep, presence = await runner_endpoint(  # with its last will: agents leave if it dies
            self.bus,
            f"{self.run_id}-runner",
            lambda c: Endpoint(c, self.run_id, topics.RUNNER, self.members, key=self.key,
                               faults=s.bus.plan(s.seed, s.time_scale)),
        )  # fmt: skip
        self.endpoint, conn = ep, ep.conn
        self.participants.endpoint = ep
        self.participants.conns.append(conn)
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
                agents = await self.participants.start_agents(
                    self.api_key, self.services, self.truth.answers
                )
            await self.participants.await_presence()
            lost = await self._run_trials()
        finally:
            await presence.stop_heartbeat()
            await self.participants.shut_down(ep, self.recorder, agents, reader)
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
            rejects=dict(self.kept_rejects + self.recorder.rejects),
            messages=self.kept,
            services=summary.get("services", {}),
            bus_faults=self.bus_faults.fired,
        )

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
        assert self.recorder is not None
        watch = asyncio.create_task(self.participants.watch(self.recorder), name="runner-watch")
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
        writes slow down as the database grows) would hold the difference in memory."""
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

    async def _trial(self, trial: int) -> None:
        assert self.endpoint is not None
        fut = self.done.setdefault(trial, asyncio.get_running_loop().create_future())
        trace_id = f"{self.run_id}-t{trial}"
        task = self.scenario.task
        readings = Readings()
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
            await self._final_result(trace_id, fut)
            messages = self.tracker.messages(trial)
            score = (
                self.crashed.pop(trial, None)
                or self.bus_faults.score(trial)
                or score_trial(self.scenario, self.truth, trial, messages, readings)
            )
        except TimeoutError:
            score = self._timed_out(trial)
        OUTSIDE.forget(trace_id)
        self._finish(score, readings)
        with contextlib.suppress(ConnectionError):
            await self._publish_labels(score)
        if self.options.on_trial is not None:
            self.options.on_trial(score)

    async def _final_result(self, trace_id: str, fut: asyncio.Future[None]) -> None:
        """`fut`, or TimeoutError after the trial timeout, which does not count the time
        the trial's agents in this process spent waiting on model servers and real tools:
        each such wait ends on its own (errorflow/core/outside_time.py)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.options.trial_timeout_s
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 a wait_for whose future
                # completes as its task is cancelled drops the cancel, and this lane
                # went on through every trial left after Ctrl-C.
                async with asyncio.timeout_at(deadline):
                    await asyncio.shield(fut)
                return
            except TimeoutError:
                later = self._deadline_after_waits(trace_id, started, loop.time())
                if later is None:
                    raise
                deadline = later

    def _deadline_after_waits(self, trace_id: str, started: float, now: float) -> float | None:
        """The trial's deadline moved by its time outside; None if it passed."""
        deadline = started + self.options.trial_timeout_s + OUTSIDE.spent_s(trace_id)
        if OUTSIDE.waiting(trace_id):  # looked at again at least this far apart
            deadline = max(deadline, now + OUTSIDE_RECHECK_S)
        return deadline if deadline > now else None

    def _timed_out(self, trial: int) -> TrialScore:
        """A trial without its final result: a bus fault, unless a message that did come
        says the infrastructure failed it."""
        infra = infra_reason(self.tracker.messages(trial))
        if infra is not None:
            return TrialScore(trial, Outcome.INFRA_FAULT, 0, reason=infra)
        timeout = self.options.trial_timeout_s
        reason = self.bus_faults.timeout_reason(trial, f"no final result within {timeout:g}s")
        return TrialScore(trial, Outcome.BUS_FAULT, 0, reason=reason)

    def _finish(self, score: TrialScore, readings: Readings | None = None) -> None:
        """A scored trial: its rows go to the store (with the scorer's `readings` for its
        root cause), its state goes (memory stays flat over long runs), and later copies
        of its messages are ignored."""
        assert self.recorder is not None
        trial = score.trial
        self.scores[trial] = score
        state = self.tracker.close(trial)
        self.bus_faults.finish(trial, state)
        # What fired is counted from the results: lost with them when a fault ended
        # the trial (its costs are not known either).
        known = score.outcome not in UNCOSTED
        self.result_faults.finish(trial, state.messages, known, self.crash_struck.pop(trial, None))
        messages = state.messages
        self.done.pop(trial, None)
        self.recorder.add_trial(
            TrialRow.from_score(self.run_id, score),
            [LabelRow.from_label(self.run_id, trial, lb) for lb in score.labels],
            readings,
        )
        if not hears_all(self.recording, self.endpoint.conn if self.endpoint else None):
            self.recorder.hold(trial, messages)  # the recorder may miss some (an outage)
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
            self.participants.control(env)
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
        self.crash_struck[struck] = agent
        self.liveness.crashed(agent, f"it {what(event, struck)}", time.monotonic())
        targets = frozenset(self.scenario.result_targets(agent))
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

    async def _publish_labels(self, score: TrialScore) -> None:
        """Labels and the outcome of a trial, as events, as soon as it is scored."""
        assert self.endpoint is not None
        trace_id = f"{self.run_id}-t{score.trial}"
        events: list[Event] = [
            LabelEvent(
                message_id=lb.message_id, agent=lb.sender, label=lb.label.value, reason=lb.reason
            )
            for lb in score.labels
        ]
        events.append(
            TrialOutcomeEvent(outcome=score.outcome.value, depth=score.depth, reason=score.reason)
        )
        for event in events:  # each out before the next, at once where nothing waits
            later = self.endpoint.post_event(score.trial, trace_id, event)
            if later is not None:
                await later

    async def drain(self) -> None:
        if self.recorder is not None:
            await self.recorder.drain()

    def stale_causes(self) -> set[int]:
        """Trials whose root cause was computed before all their messages were in."""
        recorder = self.recorder
        return recorder.causes.stale if recorder is not None and recorder.causes else set()

    def store_failure(self) -> StoreFailed | None:
        return self.recorder.failure if self.recorder is not None else None

    def ordered_scores(self) -> Sequence[TrialScore]:
        return in_trial_order(self.scores)

    def summary(self) -> RunSummary:
        """The run's summary; made once per set of scores (the run's result and its
        stored row both ask for it at the end, and its cost intervals are not cheap)."""
        if self._summary is not None and self._summary[0] == len(self.scores):
            return self._summary[1]
        summary = self._summarize()
        self._summary = (len(self.scores), summary)
        return summary

    def _summarize(self) -> RunSummary:
        scores = self.ordered_scores()
        summary = summarize(scores)
        bus_faults = self.bus_faults.counts()
        if bus_faults is not None:
            summary["bus_faults"] = bus_faults
            summary["bus_recovery"] = bus_recovery(self.bus_faults.fired, self.scores)
        summary.update(self.result_faults.counts())  # type: ignore[typeddict-item]
        if self.services.services:
            summary["services"] = service_load(self.services, scores, arrival_times(self.scenario))
        return summary
