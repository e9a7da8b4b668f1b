"""An agent: an asyncio task that owns an inbox topic for the whole run.

It collects each trial's inputs (`inputs`: the task from the runner, or a result from
each upstream agent), answers the runner's roll call and stop (`presence`), and starts
the work of each round that is ready (`trial_work`: clock, gates, loop, conclusion,
result); a discussion member's rounds of a trial run in order, and a round that
crashes becomes an `internal_error` result instead of a dead agent. Trials run
concurrently; each has its own seeded streams, simulated clock, breakers, guards and
budget, so a trial's events do not depend on what else is in flight.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import TypeVar

from errorflow.agents.inputs import InputCollector, Ready, Rejected
from errorflow.agents.kit import AgentKit, OnTrace
from errorflow.agents.presence import Presence
from errorflow.agents.publication import TrialResult, publish
from errorflow.agents.trial_work import TrialWork
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.transport import Connection
from errorflow.core.redact import redact
from errorflow.core.taxonomy import ErrorCode
from errorflow.faults.agent import Fired
from errorflow.faults.crash import InjectedCrash
from errorflow.models.backends import BackendFactory
from errorflow.policies.classify import Failure
from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.stop import CRASHED
from errorflow.scenario.agent_plan import AgentPlan
from errorflow.world.tool_world import ToolWorld

__all__ = ["Agent", "OnTrace"]

log = logging.getLogger(__name__)
_K = TypeVar("_K")
_V = TypeVar("_V")

#: Discussion rounds held for a previous round that has not started (far above the
#: trials in flight, at most 1,024).
HELD_ROUNDS_KEEP = 4096
#: Trials whose last finished round a member remembers (the most recently finished
#: kept): a trial whose last round never comes (inputs lost on the bus) is forgotten
#: after this many others, instead of staying for the rest of the run.
ROUNDS_DONE_KEEP = 4096


def _keep_newest(table: dict[_K, _V], keep: int) -> None:
    """Forget the oldest entries (a dict keeps insertion order) beyond `keep`."""
    while len(table) > keep:
        table.pop(next(iter(table)))


class Agent:
    """One agent of a run: given its plan (errorflow.scenario.agent_plan), its tool world
    and its model backends (the runtime makes them: errorflow.runtime.participants)."""

    def __init__(
        self,
        plan: AgentPlan,
        world: ToolWorld,
        backends: BackendFactory,
        run_id: str,
        conn: Connection,
        *,
        run_key: bytes,
        on_trace: OnTrace | None = None,
    ) -> None:
        self.name = name = plan.name
        self.plan = plan
        self.run_id = run_id
        members = set(plan.members) | {topics.RUNNER}
        self.endpoint = Endpoint(conn, run_id, name, members, key=run_key, faults=plan.bus_faults)
        self.backends = backends
        self.kit = AgentKit(plan, world, self.endpoint, backends, on_trace)
        self.talk = self.kit.talk
        # Reviewers that may send work back to this agent; their revision requests
        # are answered from the original inputs, kept until the trial's last round.
        # A manager's round 1 is its own work on its delegates' results.
        last_round = max(plan.last_revision, 1 if plan.spec.delegates else 0)
        self.inputs = InputCollector(
            list(plan.upstream) or [topics.RUNNER],
            list(plan.returners),
            last_round,
            peers=list(self.talk.peers),
            delegates=list(plan.spec.delegates),
        )
        self.presence = Presence(self.endpoint, name, run_id, plan.identity)
        self._tasks: set[asyncio.Task[None]] = set()
        # A discussion member's round n reads its own round n - 1 (memory), whatever
        # order the bus brought their inputs in: rounds under way by (trial, round), the
        # last round each trial finished, and rounds ready before their previous round
        # started, by the round they wait for.
        self._rounds: dict[tuple[int, int], asyncio.Event] = {}
        self._rounds_done: dict[int, int] = {}
        self._held: dict[tuple[int, int], Ready] = {}
        self.done_trials = 0
        self._opened = False

    @property
    def mismatch(self) -> str | None:
        """Why this agent refused to join the run (a joining agent must run the runner's
        experiment, checked on the roll call)."""
        return self.presence.mismatch

    async def open(self) -> None:
        """Subscribe and start the endpoint (once): from then on the agent hears the
        roll call. The runner opens the agents of its own process before it calls the
        roll, so the first call is answered (one they miss is called again only after
        a pause)."""
        if self._opened:
            return
        self._opened = True
        conn = self.endpoint.conn
        await conn.subscribe(topics.inbox(self.run_id, self.name))
        await conn.subscribe(topics.control(self.run_id, topics.RUNNER))
        await self.endpoint.start()

    async def run(self) -> None:
        await self.open()
        try:
            async for env in self.endpoint.receive():
                try:
                    if env.kind is Kind.CONTROL:
                        if await self.presence.on_control(env.payload):
                            break
                    elif env.kind in (Kind.TASK, Kind.RESULT) and env.recipient == self.name:
                        self._accept(env)
                except Exception as exc:  # one message never stops the agent
                    self.endpoint.handler_failed(env, exc)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.endpoint.close()
            await self.backends.aclose()

    def _accept(self, env: Envelope) -> None:
        match self.inputs.accept(env):
            case Rejected(reason=reason):
                self.endpoint.rejects[reason] += 1
            case Ready() as ready:
                self._start(ready)

    def _start(self, ready: Ready) -> None:
        trial, round_ = ready.trial, ready.round
        before: asyncio.Event | None = None
        if self.talk.member:
            previous = (trial, round_ - 1)
            unstarted = previous not in self._rounds
            if round_ > 0 and unstarted and self._rounds_done.get(trial, -1) < round_ - 1:
                # It starts once its previous round does; one whose previous round never
                # comes (inputs lost on the bus) cannot end its trial anyway (its peers
                # wait for our answer), so only a bounded window of them is kept.
                self._held[previous] = ready
                _keep_newest(self._held, HELD_ROUNDS_KEEP)
                return
            before = self._rounds.get(previous)
            self._rounds[(trial, round_)] = asyncio.Event()
        task = asyncio.create_task(self._guarded(trial, round_, ready.inputs, before))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        held = self._held.pop((trial, round_), None)
        if held is not None:
            self._start(held)

    async def _guarded(
        self,
        trial: int,
        round_: int,
        inputs: list[Envelope],
        before: asyncio.Event | None = None,
    ) -> None:
        try:
            if before is not None:  # our previous round of this trial: its answer first
                await before.wait()
            await self.process(trial, inputs, round_)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a crash becomes a structured error, not a dead agent
            # An injected crash is the experiment's (an `agent_crashed` event says so).
            level = logging.INFO if isinstance(exc, InjectedCrash) else logging.ERROR
            log.log(
                level,
                "%s: trial %d crashed: %s",
                self.name,
                trial,
                redact(f"{type(exc).__name__}: {exc}"),
            )
            log.debug("%s", redact("".join(traceback.format_exception(exc))))
            try:
                await self._publish_crash(trial, round_, inputs, exc)
            except Exception as lost:  # the bus itself is gone: the runner's liveness
                log.warning("%s: trial %d: crash not reported: %s", self.name, trial, lost)
        finally:
            self.inputs.finished(trial, round_)
            done = self._rounds.pop((trial, round_), None)
            if done is not None:
                done.set()
                # re-inserted: the dict's order is that of the rounds' ends, oldest first
                self._rounds_done[trial] = max(round_, self._rounds_done.pop(trial, -1))
                _keep_newest(self._rounds_done, ROUNDS_DONE_KEEP)
            if round_ >= self.talk.last_round:
                self.kit.memory.pop(trial, None)
                self._rounds_done.pop(trial, None)
            self.done_trials += 1

    async def process(self, trial: int, inputs: list[Envelope], round_: int = 0) -> None:
        """One round of one trial (errorflow.agents.trial_work)."""
        await TrialWork(self.kit, trial, inputs, round_).run()

    async def _publish_crash(
        self, trial: int, round_: int, inputs: list[Envelope], exc: Exception
    ) -> None:
        trace_id = inputs[0].trace_id if inputs else f"{self.run_id}-{trial}"
        failure = Failure(
            ErrorCode.INTERNAL_ERROR, self.name, redact(f"{type(exc).__name__}: {exc}")[:300]
        )
        final = FinalAnswer(text="agent crashed", unresolved=[n.id for n in self.plan.task.needs])
        injected = [Fired("crash")] if isinstance(exc, InjectedCrash) else []
        result = TrialResult(
            trial,
            round_,
            trace_id,
            final,
            [failure],
            CRASHED,
            reports=inputs,
            derived=[env.id for env in inputs],
            fired=injected,
        )
        await publish(self.kit, result)
