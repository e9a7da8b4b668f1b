"""An agent: an asyncio task that owns an inbox topic and answers each trial's inputs.

For every trial it waits for the inputs its topology promises (the task from the
runner, or a result from each upstream agent), then runs its loop: model → tool calls
through the tool gate → model ... → final answer, and publishes one result message to
every agent it `sends_to` (or to the runner). Trials run concurrently; each has its
own seeded streams, simulated clock, breakers, guards and budget, so a trial's events
do not depend on what else is in flight.

Propagation, the experiment's switch, is applied here:
- explicit: the result carries `status`, structured `errors` (own failures with
  hops 0, upstream ones with hops + 1, origin kept) and a lowered `confidence`;
- implicit: failures are swallowed (the tool gate hands the model empty results) and
  every message says `ok` with full confidence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from errorflow.agents.answers import answer_from_wire, answer_to_wire
from errorflow.agents.backends import BackendFactory
from errorflow.agents.model import (
    AssistantTurn,
    FinalAnswer,
    ModelCallError,
    ModelRequest,
    NeedView,
    ObservationTurn,
    TaskTurn,
    ToolDef,
    Turn,
    UpstreamTurn,
)
from errorflow.agents.model_gate import ModelGate
from errorflow.agents.tool_gate import ToolGate
from errorflow.agents.world import DESCRIPTIONS, ToolClient, hidden_identifier, input_schema
from errorflow.bus import topics
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.envelope import Envelope, Kind, Status, WireError
from errorflow.bus.transport import Connection
from errorflow.core.seeding import stream
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import RETRYABLE, UNRECOVERABLE, ErrorCode
from errorflow.policies.breaker import BreakerBank
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.loop_guard import LoopGuard
from errorflow.policies.redact import redact
from errorflow.scenario import identity
from errorflow.scenario.model import Scenario
from errorflow.scenario.policy import policy_for

log = logging.getLogger(__name__)

#: Trials whose original inputs a reviewer may still send back (far above any number of
#: trials in flight, which is at most 1,024).
ROUND0_KEEP = 4096

SYSTEM_PROMPTS = {
    "researcher": "You are a researcher. Use the tools to find each fact the task needs, "
    "then submit what you found. Never state a fact you did not get from a tool.",
    "writer": "You are a writer. Turn the findings you receive into a report. If an upstream "
    "agent reports errors, partial_failure or low confidence, do not write around the gap: "
    "flag it or abstain.",
    "reviewer": "You are a reviewer. Check the report you receive against its sources; flag "
    "or withhold claims that are not supported.",
}


@dataclass
class TrialInputs:
    messages: dict[str, Envelope] = field(default_factory=dict)  # by sender
    started: bool = False


class Agent:
    def __init__(
        self,
        name: str,
        scenario: Scenario,
        run_id: str,
        conn: Connection,
        *,
        api_key: str | None = None,
        on_trace: Callable[[str, int, list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.name = name
        self.scenario = scenario
        self.spec = scenario.agents[name]
        self.policy = policy_for(scenario, name)
        self.implicit = scenario.propagation == "implicit"
        members = set(scenario.agents) | {topics.RUNNER}
        self.endpoint = Endpoint(conn, run_id, name, members)
        self.run_id = run_id
        self.expected = scenario.upstream_of(name) or [topics.RUNNER]
        self.backends = BackendFactory(self.spec.model, scenario.seed, name, api_key)
        self.tools = [
            ToolDef(
                t,
                scenario.tools[t].description or DESCRIPTIONS[scenario.tools[t].kind],
                input_schema(scenario.tools[t].kind),
            )
            for t in self.spec.tools
        ]
        self._inputs: dict[tuple[int, int], TrialInputs] = {}
        self._done: set[tuple[int, int]] = set()  # resends of finished work are dropped
        # Reviewers that may send work back to this agent; their revision requests
        # are answered from the original inputs, kept until the trial's last round.
        self.returners = [n for n, a in scenario.agents.items() if a.returns_to == name]
        self._round0: OrderedDict[int, list[Envelope]] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_trace = on_trace
        # A joining agent must run the runner's experiment (checked on the roll call).
        self.public_scenario = identity.public(scenario)
        self.mismatch: str | None = None
        self.done_trials = 0

    async def run(self) -> None:
        conn = self.endpoint.conn
        await conn.subscribe(topics.inbox(self.run_id, self.name))
        await conn.subscribe(topics.control(self.run_id, topics.RUNNER))
        await self.endpoint.start()
        try:
            async for env in self.endpoint.receive():
                if env.kind is Kind.CONTROL:
                    action = env.payload.get("action")
                    if action == "roll_call":
                        theirs = env.payload.get("scenario")
                        if isinstance(theirs, dict) and identity.agent_view(
                            theirs
                        ) != identity.agent_view(self.public_scenario):
                            self.mismatch = (
                                f"agent {self.name}: the runner's scenario differs from ours "
                                "(file, --set, --seed or --propagation); not joining run "
                                f"{self.run_id}"
                            )
                            log.error("%s", self.mismatch)
                            break
                        await self._hello()
                    elif action == "stop":
                        await self._bye()
                        break
                elif env.kind in (Kind.TASK, Kind.RESULT) and env.recipient == self.name:
                    self._accept(env)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.endpoint.close()
            await self.backends.aclose()

    async def _bye(self) -> None:
        """Our last message of the run: the recorder knows nothing of ours follows."""
        with contextlib.suppress(ConnectionError):
            await self.endpoint.send(
                kind=Kind.CONTROL,
                recipient=topics.RUNNER,
                trial=0,
                trace_id=f"{self.run_id}-presence",
                payload={"action": "bye", "agent": self.name},
            )

    async def _hello(self) -> None:
        """Present: sent only in answer to a roll call, which carries the runner's
        scenario, so an agent never counts as present for an experiment it does not run."""
        await self.endpoint.send(
            kind=Kind.CONTROL,
            recipient=topics.RUNNER,
            trial=0,
            trace_id=f"{self.run_id}-presence",
            payload={"action": "hello", "agent": self.name},
        )

    def _accept(self, env: Envelope) -> None:
        round_ = _round(env)
        key = (env.trial, round_)
        if key in self._done:
            return  # a resend of work already answered
        if env.kind is Kind.TASK and env.sender in self.returners:
            base = self._round0.get(env.trial)
            if base is None:
                self.endpoint.rejects["revision_without_inputs"] += 1
                return
            self._start(env.trial, round_, [*base, env])
            return
        if env.sender not in self.expected:
            self.endpoint.rejects["unexpected_sender"] += 1
            return
        inputs = self._inputs.setdefault(key, TrialInputs())
        if inputs.started or env.sender in inputs.messages:
            return  # a resend of an input we already have
        inputs.messages[env.sender] = env
        if all(s in inputs.messages for s in self.expected):
            inputs.started = True
            received = list(inputs.messages.values())
            if self.returners and round_ == 0:
                self._round0[env.trial] = received
                while len(self._round0) > ROUND0_KEEP:  # trials approved at once never
                    self._round0.popitem(last=False)  # come back: keep a bounded window
            self._start(env.trial, round_, received)

    def _start(self, trial: int, round_: int, inputs: list[Envelope]) -> None:
        self._done.add((trial, round_))
        if len(self._done) > 200_000:  # bounded memory over very long runs
            self._done = {k for k in self._done if k[0] >= trial - 100_000}
        task = asyncio.create_task(self._guarded(trial, round_, inputs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, trial: int, round_: int, inputs: list[Envelope]) -> None:
        try:
            await self.process(trial, inputs, round_)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a crash becomes a structured error, not a dead agent
            log.error(
                "%s: trial %d crashed: %s", self.name, trial, redact(f"{type(exc).__name__}: {exc}")
            )
            log.debug("%s", redact("".join(traceback.format_exception(exc))))
            await self._publish_crash(trial, round_, inputs, exc)
        finally:
            self._inputs.pop((trial, round_), None)
            if round_ >= max(
                (self.scenario.agents[r].max_revisions for r in self.returners), default=0
            ):
                self._round0.pop(trial, None)
            self.done_trials += 1

    # -- one trial ------------------------------------------------------------------
    async def process(self, trial: int, inputs: list[Envelope], round_: int = 0) -> None:
        trace_id = inputs[0].trace_id
        seed = self.scenario.seed
        # A revision round is a new attempt: its own draws (round 0 keeps the plain name).
        owner = self.name if round_ == 0 else f"{self.name}@r{round_}"
        clock = SimClock(self.scenario.time_scale)
        budget = Budget(self.policy.budget)
        guard = LoopGuard(self.policy.guards)
        pending: list[asyncio.Task[None]] = []

        def emit(type_: str, data: dict[str, Any]) -> None:
            pending.append(
                asyncio.create_task(
                    self.endpoint.event(trial, trace_id, type_, {"agent": self.name, **data})
                )
            )

        gate = ToolGate(
            agent=self.name,
            trial=trial,
            policy=self.policy,
            client=ToolClient(self.scenario, trial, owner),
            clock=clock,
            rng=stream(seed, trial, owner, "retry"),
            budget=budget,
            breakers=BreakerBank(self.policy.breaker),
            guard=guard,
            implicit=self.implicit,
            emit=emit,
        )
        model = ModelGate(
            self.backends.for_trial(trial, owner),
            self.policy,
            clock,
            stream(seed, trial, owner, "model-retry"),
            budget,
            emit,
        )
        emit("agent_start", {"inputs": [env.sender for env in inputs]})
        turns: list[Turn] = [self._task_turn(trial)]
        turns += [self._upstream_turn(env) for env in inputs if env.sender != topics.RUNNER]
        failures: list[Failure] = []
        recovered_tools: set[str] = set()
        final: FinalAnswer | None = None
        stopped: str | None = None
        successes = 0
        while final is None and stopped is None:
            budget.start_step()
            reason = budget.exhausted()
            if reason is not None:
                stopped = ErrorCode.BUDGET_EXHAUSTED.value
                failures.append(Failure(ErrorCode.BUDGET_EXHAUSTED, "budget", reason))
                break
            request = ModelRequest(
                self.name, self.spec.role, SYSTEM_PROMPTS[self.spec.role], list(turns), self.tools
            )
            try:
                response = await model.complete(request)
            except ModelCallError as exc:
                stopped = ErrorCode.MODEL_ERROR.value
                failures.append(
                    Failure(exc.code, "model", redact(str(exc)), http_status=exc.status)
                )
                break
            if response.final is not None:
                final = response.final
                break
            if not response.calls:
                final = FinalAnswer(text="(no answer)", flags=["empty model response"])
                break
            turns.append(AssistantTurn(list(response.calls)))
            step_failures = 0
            for call in response.calls:
                outcome = await gate.call(call)
                turns.append(ObservationTurn(call.id, call.name, outcome.observation))
                if outcome.failure is None:
                    successes += 1
                    recovered_tools.add(call.name)
                    continue
                step_failures += 1
                failures.append(outcome.failure)
                if outcome.failure.code in UNRECOVERABLE and self.policy.stop_on_unrecoverable:
                    stopped = f"unrecoverable:{outcome.failure.code.value}"
            if stopped is None:
                verdict = guard.end_step(float(successes - step_failures))
                if verdict is not None:
                    stopped = verdict.code.value
        if stopped is not None:  # every way a loop can be stopped is an event
            code = stopped.removeprefix("unrecoverable:")
            emit("loop_stop", {"code": code, "stopped": stopped, "steps": budget.steps})
        if pending:
            await _settle(pending)
            pending.clear()
        if final is None:
            final = self._fallback_answer(turns, stopped)
        if self.on_trace is not None:
            self.on_trace(self.name, trial, gate.trace)
        # A failure is recovered when a later call to the same tool succeeded and every
        # need that tool serves ended with a certain claim; anything else is reported.
        open_tools = self._open_tools(turns, final)
        unrecovered = [
            f
            for f in failures
            if f.tool == "model" or f.tool not in recovered_tools or f.tool in open_tools
        ]
        costs = {
            "backend_calls": budget.backend_calls,
            "model_calls": model.calls,
            "input_tokens": model.input_tokens,
            "output_tokens": model.output_tokens,
            "retries": gate.retries + model.retries,
            "sim_seconds": round(clock.now, 6),
        }
        await self._publish_result(
            trial, trace_id, inputs, final, unrecovered, stopped, costs, round_
        )
        if pending:
            await _settle(pending)

    def _task_turn(self, trial: int) -> TaskTurn:
        task = self.scenario.task
        needs = [
            NeedView(
                n.id,
                n.tool,
                n.arg,
                n.wording,
                None if hidden_identifier(self.scenario, trial, n) else n.value,
                meant=n.value,
            )
            for n in task.needs
        ]
        return TaskTurn(task.prompt, needs)

    def _upstream_turn(self, env: Envelope) -> UpstreamTurn:
        return UpstreamTurn(
            sender=env.sender,
            status=env.status.value,
            confidence=env.confidence,
            errors=[e.model_dump(mode="json") for e in env.errors],
            answer=answer_from_wire(env.payload.get("answer")),
        )

    def _open_tools(self, turns: list[Turn], final: FinalAnswer) -> set[str]:
        """Tools serving a need this agent answers for that the final answer leaves open."""
        task = next(t for t in turns if isinstance(t, TaskTurn))
        certain = {c.key for c in final.claims if c.certain}
        return {
            n.tool
            for n in self._own_needs(task.needs)
            if n.id not in certain and not any(k.startswith(n.id + ".") for k in certain)
        } | {
            n.tool
            for n in task.needs
            if n.id in final.unresolved or any(u.startswith(n.id + ".") for u in final.unresolved)
        }

    def _own_needs(self, needs: list[NeedView]) -> list[NeedView]:
        """A researcher answers for the needs its tools serve; others for all."""
        if self.spec.role != "researcher":
            return needs
        return [n for n in needs if n.tool in self.spec.tools]

    def _fallback_answer(self, turns: list[Turn], stopped: str | None) -> FinalAnswer:
        """The loop ended without a model answer (policy stop, model failure)."""
        task = next(t for t in turns if isinstance(t, TaskTurn))
        answer = FinalAnswer(text=f"stopped: {stopped}")
        if self.implicit:
            # The anti-pattern again: a stopped agent reports "nothing found".
            from errorflow.agents.model import Claim

            answer.claims = [Claim(n.id, None, True) for n in self._own_needs(task.needs)]
        else:
            answer.unresolved = [n.id for n in self._own_needs(task.needs)]
        return answer

    async def _publish_result(
        self,
        trial: int,
        trace_id: str,
        inputs: list[Envelope],
        final: FinalAnswer,
        failures: list[Failure],
        stopped: str | None,
        costs: dict[str, Any],
        round_: int = 0,
    ) -> None:
        own = [
            WireError(
                code=f.code,
                tool=f.tool,
                message=_short(f),
                retryable=f.code in RETRYABLE,
                retry_after_s=f.retry_after_s,
                suggestion=None,
                origin=self.name,
                hops=0,
            )
            for f in _dedupe(failures)
        ]
        upstream = [e.model_copy(update={"hops": e.hops + 1}) for env in inputs for e in env.errors]
        upstream_conf = min((env.confidence for env in inputs), default=1.0)
        if self.implicit:
            status, confidence, errors = Status.OK, 1.0, []
        else:
            errors = own + upstream
            status = _status(final, errors, stopped)
            confidence = _confidence(final, errors, upstream_conf)
        payload: dict[str, Any] = {
            "role": self.spec.role,
            "round": round_,
            "answer": answer_to_wire(final),
            "stopped": stopped,
            # Simulator bookkeeping for the scorer and reports; never shown to a model.
            "trace": {"costs": costs, "failures": [f.code.value for f in failures]},
        }
        kind, targets = Kind.RESULT, self.spec.sends_to or [topics.RUNNER]
        if self.spec.returns_to and final.revise and round_ < self.spec.max_revisions:
            # Send the work back for revision instead of passing it on.
            kind, targets = Kind.TASK, [self.spec.returns_to]
            payload["round"] = round_ + 1
        for i, target in enumerate(targets):
            if i == 1:  # the costs were spent once, whatever the number of recipients
                payload = {**payload, "trace": {**payload["trace"], "costs": {}}}
            await self.endpoint.send(
                kind=kind,
                recipient=target,
                trial=trial,
                trace_id=trace_id,
                payload=payload,
                status=status,
                confidence=confidence,
                errors=errors,
                derived_from=[env.id for env in inputs],
            )

    async def _publish_crash(
        self, trial: int, round_: int, inputs: list[Envelope], exc: Exception
    ) -> None:
        trace_id = inputs[0].trace_id if inputs else f"{self.run_id}-{trial}"
        failure = Failure(
            ErrorCode.INTERNAL_ERROR, self.name, redact(f"{type(exc).__name__}: {exc}")[:300]
        )
        final = FinalAnswer(
            text="agent crashed", unresolved=[n.id for n in self.scenario.task.needs]
        )
        await self._publish_result(trial, trace_id, inputs, final, [failure], "crashed", {}, round_)


async def _settle(pending: list[asyncio.Task[None]]) -> None:
    """Wait for event publishes; a lost event is telemetry lost, not a failed trial."""
    for result in await asyncio.gather(*pending, return_exceptions=True):
        if isinstance(result, Exception):
            log.warning("event not published: %s", redact(str(result)))


def _round(env: Envelope) -> int:
    value = env.payload.get("round", 0)
    return value if isinstance(value, int) and 0 <= value <= 100 else 0


def _short(f: Failure) -> str:
    return f"{f.tool}: {f.code.value}" + (f" after {f.attempts} attempts" if f.attempts > 1 else "")


def _dedupe(failures: list[Failure]) -> list[Failure]:
    seen: set[tuple[str, str]] = set()
    out = []
    for f in failures:
        key = (f.tool, f.code.value)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _status(final: FinalAnswer, errors: list[WireError], stopped: str | None) -> Status:
    if not final.claims and (errors or stopped or final.unresolved or final.abstained):
        return Status.FAILED
    if errors or final.unresolved or final.abstained or final.flags or stopped:
        return Status.PARTIAL_FAILURE
    return Status.OK


def _confidence(final: FinalAnswer, errors: list[WireError], upstream: float) -> float:
    """Explicit propagation lowers confidence: errors cap it at 0.4, flags or
    unresolved needs at 0.6, an abstention at 0.2; never above the inputs'."""
    conf = 1.0
    if final.flags or final.unresolved:
        conf = min(conf, 0.6)
    if errors:
        conf = min(conf, 0.4)
    if final.abstained:
        conf = min(conf, 0.2)
    return round(min(conf, upstream), 3)
