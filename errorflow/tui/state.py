"""A pure model of one run, built from the envelopes seen on the bus (no Textual here).

Theory of operation
-------------------
`RunModel.apply(env)` is the only mutator; widgets read the model after a batch of
`apply` calls, so the model never renders and the UI never computes.

* Result messages are labelled as they arrive (`label_message`), not at the end of the
  trial: a message's "touched" bit depends only on its own trace and on the messages it
  was derived from, which arrived before it. That is what lets contamination travel
  along the graph's arrows live.
* Every label moves the counts of the graph (errorflow.tui.drawing.flow): per agent, per trial;
  per edge, per message. A corrected label moves them again.
* A trial is scored locally (`score_trial`) as soon as the `TrialTracker` says it is
  done (every terminal's final result and its provenance in): the runner's own rule,
  from the same module. The runner's own `label` / `trial_outcome` events (published
  as each trial is scored) override the local verdicts: they are the authority, and
  the only source when no scenario is known (attaching to a run we cannot score).
* Events and control messages are read through their typed contracts (`parse_event`,
  `parse_control`); an event payload no known kind parses is counted, never applied.
* Without a scenario the topology is learnt from the messages seen.
"""

from __future__ import annotations

import contextlib
from collections import Counter, OrderedDict
from dataclasses import dataclass

from errorflow.policies.breaker import BreakerState
from errorflow.protocol import topics
from errorflow.protocol.control import (
    End,
    RollCall,
    is_ack,
    parse_control,
)
from errorflow.protocol.envelope import Envelope, Kind, Status
from errorflow.protocol.events import (
    AgentStart,
    BreakerChange,
    Event,
    GuardBlock,
    LabelEvent,
    LoopStop,
    ModelCall,
    ModelError,
    RetriesExhausted,
    RetryScheduled,
    ToolCallEvent,
    TrialOutcomeEvent,
    parse_event,
)
from errorflow.protocol.result import failures_of
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario.loader import ScenarioError, validate_data
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import (
    Label,
    MessageLabel,
    Outcome,
    Truth,
    label_message,
    score_trial,
)
from errorflow.scoring.stats import wilson
from errorflow.tui.drawing.flow import (
    STATE_OF_LABEL,
    AgentState,
    AgentView,
    BreakerStep,
    EdgeKind,
    EdgeView,
)

__all__ = ["STATE_OF_LABEL", "AgentState", "AgentView", "EdgeView", "FeedItem", "RunModel"]

#: Messages kept for provenance; older trials are forgotten first (long sweeps).
MESSAGE_LIMIT = 50_000
#: Trials whose policy events are kept for the trial view (older ones are forgotten).
TRIAL_EVENT_LIMIT = 5_000
#: Outcomes shown in the tallies (bus faults are shown only when they happen).
TALLY_OUTCOMES = (Outcome.SUCCESS, Outcome.CONTAINED, Outcome.CONTAMINATED)
#: Agent events the trial view lists (starts and model calls would drown them).
POLICY_EVENTS = (ToolCallEvent, RetryScheduled, RetriesExhausted, GuardBlock, BreakerChange,
                 LoopStop, ModelError)  # fmt: skip


@dataclass(eq=False)  # identity: rows are matched by object, never by value
class FeedItem:
    env: Envelope
    label: Label | None = None


@dataclass
class TrialView:
    """A trial's verdict (its messages are the tracker's)."""

    outcome: Outcome | None = None
    depth: int = 0
    authoritative: bool = False  # decided by the runner's trial_outcome event
    reason: str = ""


@dataclass(frozen=True)
class Rate:
    count: int
    n: int

    @property
    def rate(self) -> float:
        return self.count / self.n if self.n else 0.0

    @property
    def ci(self) -> tuple[float, float]:
        return wilson(self.count, self.n)


def carries_failure(env: Envelope, touched: bool) -> bool:
    """A failure travels with this message: its sender's or upstream, said or not."""
    return touched or bool(env.errors) or env.status is not Status.OK


class RunModel:
    def __init__(
        self,
        run_id: str,
        scenario: Scenario | None = None,
        *,
        propagation: str | None = None,
        trials: int | None = None,
    ) -> None:
        self.run_id = run_id
        self.scenario: Scenario | None = None
        self.propagation = propagation or (scenario.propagation if scenario else "?")
        self.total = trials if trials is not None else (scenario.trials if scenario else None)
        self.truth: Truth | None = None
        self.tracker = TrialTracker()
        self.agents: dict[str, AgentView] = {}
        self.edges: dict[tuple[str, str], EdgeView] = {}
        self.trials: dict[int, TrialView] = {}
        self.messages: OrderedDict[str, Envelope] = OrderedDict()
        self.labels: dict[str, Label] = {}
        self.reasons: dict[str, str] = {}  # message id -> why it got its label
        self._touched: dict[str, bool] = {}
        self.trial_events: OrderedDict[int, list[tuple[str, str]]] = OrderedDict()
        #: What each agent's events added to its policy figures in a trial not over yet:
        #: taken back if the trial ends a bus fault (the run counts only trials whose
        #: results arrived).
        self._pending: OrderedDict[int, dict[str, list[int]]] = OrderedDict()
        self._unarrived_trials: OrderedDict[int, None] = OrderedDict()  # their late events too
        self.feed: list[FeedItem] = []  # appended here, drained by the feed widget
        self._feed_items: dict[str, FeedItem] = {}
        self.relabelled: list[FeedItem] = []  # feed rows whose label arrived later
        self.outcomes: Counter[Outcome] = Counter()
        self.finished_order: list[int] = []
        self.contamination_history: list[float] = []
        self.events = 0
        self.unknown_events = 0  # event payloads no known kind parses
        self.batch = 0
        self.ended = False
        self.last_event = ""
        self.topology_changed = False
        if scenario is not None:
            self._topology(scenario)

    def _topology(self, scenario: Scenario) -> None:
        """Agents, tools and edges as the scenario declares them (`downstream_of` has
        `waits_for` too, and a delegate's result to its manager; peers discuss both
        ways; `returns_to` is the reviewer's send-back; a manager sends its delegates
        their sub-tasks)."""
        self.scenario = scenario
        self.truth = Truth(scenario)
        self.tracker.terminals = frozenset(scenario.terminal_agents())
        for name, spec in scenario.agents.items():
            view = self._agent(name)
            view.tools = list(spec.tools)
            for t in spec.tools:
                view.breakers.setdefault(t, BreakerState.CLOSED)
        for name, spec in scenario.agents.items():
            for dst in scenario.downstream_of(name):
                self._edge(name, dst, EdgeKind.SENDS)
            for peer in scenario.peers_of(name):  # a discussion's rounds go both ways
                self._edge(name, peer, EdgeKind.SENDS)
            if spec.returns_to is not None:
                self._edge(name, spec.returns_to, EdgeKind.RETURNS)
            for delegate in spec.delegates:  # sub-tasks out (results come back)
                self._edge(name, delegate, EdgeKind.SENDS)
        self.topology_changed = True

    # -- outboxes (drained by the feed widget) -------------------------------------------
    def take_feed(self) -> tuple[list[FeedItem], list[FeedItem]]:
        """New feed items and items whose label changed since the last call."""
        new, relabelled = self.feed, self.relabelled
        self.feed, self.relabelled = [], []
        return new, relabelled

    # -- queries ----------------------------------------------------------------------
    @property
    def done(self) -> int:
        return len(self.finished_order)

    def rate(self, outcome: Outcome) -> Rate:
        """Over the trials that measured something: an infrastructure fault is no result."""
        return Rate(self.outcomes[outcome], self.done - self.outcomes[Outcome.INFRA_FAULT])

    def outcome_vector(self, outcome: Outcome) -> dict[int, bool]:
        """Per finished trial: did it end with this outcome (for paired comparisons)."""
        return {t: v.outcome is outcome for t, v in self.trials.items() if v.outcome is not None}

    def provenance(self, message_id: str) -> list[tuple[int, Envelope | None, str]]:
        """The message's ancestors, depth first: (depth, envelope or None if unseen, id)."""
        out: list[tuple[int, Envelope | None, str]] = []
        seen: set[str] = set()

        def walk(mid: str, depth: int) -> None:
            env = self.messages.get(mid)
            out.append((depth, env, mid))
            if env is None or mid in seen:
                return
            seen.add(mid)
            for parent in env.derived_from:
                walk(parent, depth + 1)

        walk(message_id, 0)
        return out

    def trial_messages(self, trial: int) -> list[Envelope]:
        """A trial's task and result messages in arrival order."""
        return list(self.tracker.messages(trial))

    # -- the one mutator ----------------------------------------------------------------
    def apply(self, env: Envelope) -> None:
        if env.run_id != self.run_id:
            return
        self.events += 1
        if env.kind is Kind.EVENT:
            self._event(env)
        elif env.kind is Kind.CONTROL:
            self._control(env)
        else:
            self._message(env)

    def _control(self, env: Envelope) -> None:
        # Only the runner's end and roll call matter here; acks, most of the control
        # traffic, are skipped before parsing (as Endpoint.receive does).
        if env.sender != topics.RUNNER or is_ack(env.payload):
            return
        action = parse_control(env.payload)
        if isinstance(action, End):
            self.ended = True
            self.last_event = "runner: end of run"
        elif isinstance(action, RollCall) and self.scenario is None:
            self._adopt(action.scenario)

    def _adopt(self, data: dict[str, object]) -> None:
        """An attached run names its scenario in the roll call: score it like our own
        (through the loader's every check). Not one with Python or MCP tools: scoring it
        would run code (or start a server) a message named."""
        try:
            scenario = validate_data(data, "roll call", sweep=False)
        except (ScenarioError, ValueError):
            return
        if any(tool.kind in ("python", "mcp") for tool in scenario.tools.values()):
            return
        self.propagation = scenario.propagation
        self.total = scenario.trials
        self._topology(scenario)

    def _agent(self, name: str) -> AgentView:
        view = self.agents.get(name)
        if view is None:
            view = self.agents[name] = AgentView(name)
            self.topology_changed = True
        return view

    def _edge(self, src: str, dst: str, kind: EdgeKind) -> EdgeView:
        edge = self.edges.get((src, dst))
        if edge is None:
            self._agent(src)
            self._agent(dst)
            edge = self.edges[(src, dst)] = EdgeView(src, dst, kind)
            self.topology_changed = True
        return edge

    def _message(self, env: Envelope) -> None:
        self._remember(env)
        self.trials.setdefault(env.trial, TrialView())
        done = self.tracker.add(env)
        item = FeedItem(env)
        self._feed_items[env.id] = item
        self.last_event = f"{env.sender} → {env.recipient}: {env.kind.value} {env.status.value}"
        from_agent = env.sender != topics.RUNNER
        if env.recipient != topics.RUNNER and (env.recipient in self.agents or not self.scenario):
            self._agent(env.recipient).working.add(env.trial)
        if env.kind is Kind.TASK:
            if from_agent:  # work sent back (returns_to)
                edge = self._edge(env.sender, env.recipient, EdgeKind.RETURNS)
                edge.crossed(env.id, self.batch, self.events, failure=False)
            self.feed.append(item)
            if done:  # its results came first (another topic): this task completes it
                self._score(env.trial)
            return
        touched = bool(failures_of(env.payload)) or any(
            self._touched.get(d, False) for d in env.derived_from
        )
        self._touched[env.id] = touched
        if from_agent:
            self._sent(env, touched)
        if self.truth is not None:
            self._set_label(env, label_message(env, self.truth, touched))
        self.feed.append(item)
        if done:
            self._score(env.trial)

    def _sent(self, env: Envelope, touched: bool) -> None:
        """A result left an agent: its node and the edge it travels light up."""
        sender = self._agent(env.sender)
        sender.working.discard(env.trial)
        sender.confidence = env.confidence
        sender.batch = self.batch
        sender.sent(env.trial, env.id)
        if failures_of(env.payload):
            sender.origins += 1
        if env.errors:
            sender.last_error = env.errors[0].code.value
        if env.recipient != topics.RUNNER:
            edge = self._edge(env.sender, env.recipient, EdgeKind.SENDS)
            edge.crossed(env.id, self.batch, self.events, failure=carries_failure(env, touched))

    def _set_label(self, env: Envelope, verdict: MessageLabel | tuple[Label, str]) -> None:
        label, reason = verdict if isinstance(verdict, tuple) else (verdict.label, verdict.reason)
        if reason:
            self.reasons[env.id] = reason
        previous = self.labels.get(env.id)
        if previous is label:
            return
        self.labels[env.id] = label
        agent = self.agents.get(env.sender)
        if agent is not None:
            agent.relabel(env.trial, env.id, previous, label)
        edge = self.edges.get((env.sender, env.recipient))
        if edge is not None and env.kind is Kind.RESULT:
            edge.relabel(env.id, previous, label)
        item = self._feed_items.get(env.id)
        if item is not None:
            item.label = label
            self.relabelled.append(item)

    def _remember(self, env: Envelope) -> None:
        self.messages[env.id] = env
        while len(self.messages) > MESSAGE_LIMIT:
            old, _ = self.messages.popitem(last=False)
            self._feed_items.pop(old, None)
            self._touched.pop(old, None)
            self.reasons.pop(old, None)

    def _score(self, trial_no: int) -> None:
        """The local verdict of a trial the tracker says is done (once; the runner's
        verdict, when it comes, overrides it)."""
        if self.trials[trial_no].outcome is not None or self.scenario is None:
            return
        assert self.truth is not None
        messages = self.tracker.messages(trial_no)
        score = score_trial(self.scenario, self.truth, trial_no, messages)
        for lb in score.labels:
            env = self.messages.get(lb.message_id)
            if env is not None:
                self._set_label(env, (lb.label, lb.reason))
        self._finish(trial_no, score.outcome, score.depth, authoritative=False)
        self.trials[trial_no].reason = score.reason

    def _finish(self, trial_no: int, outcome: Outcome, depth: int, *, authoritative: bool) -> None:
        trial = self.trials.setdefault(trial_no, TrialView())
        if trial.authoritative:
            return
        previous = trial.outcome
        if previous is None:
            self.finished_order.append(trial_no)
        else:
            self.outcomes[previous] -= 1
        trial.outcome, trial.depth, trial.authoritative = outcome, depth, authoritative
        self.outcomes[outcome] += 1
        rate = self.rate(Outcome.CONTAMINATED).rate
        if previous is None:
            self.contamination_history.append(rate)
        else:
            self.contamination_history[-1] = rate  # a correction, not a new trial

    def _event(self, env: Envelope) -> None:
        event = parse_event(env.payload)
        if event is None:
            self.unknown_events += 1
            return
        if env.sender == topics.RUNNER:
            self._verdict(env.trial, event)
            return
        name = env.sender if isinstance(event, TrialOutcomeEvent) else event.agent
        agent = self._agent(name)
        self.last_event = describe(agent.name, event)
        if isinstance(event, POLICY_EVENTS):
            self._trial_event(env.trial, agent.name, self.last_event)
        if env.trial in self._unarrived_trials:
            return  # a bus fault ended its trial: the run counts none of it
        before = _figures(agent)
        _count(agent, env.trial, event)
        added = [a - b for a, b in zip(_figures(agent), before, strict=True)]
        if any(added):
            pending = self._pending.setdefault(env.trial, {})
            sums = pending.setdefault(agent.name, [0] * len(added))
            pending[agent.name] = [a + b for a, b in zip(sums, added, strict=True)]
            while len(self._pending) > TRIAL_EVENT_LIMIT:
                self._pending.popitem(last=False)

    def _unarrived(self, trial_no: int) -> None:
        """A trial that ended a bus fault: what its agents did is not counted, as the
        run counts it (its results, which carried it, never arrived)."""
        for name, added in self._pending.pop(trial_no, {}).items():
            agent = self.agents.get(name)
            if agent is not None:
                for figure, n in zip(POLICY_FIGURES, added, strict=True):
                    setattr(agent, figure, getattr(agent, figure) - n)
        for agent in self.agents.values():
            agent.forget(trial_no)
        self._unarrived_trials[trial_no] = None
        while len(self._unarrived_trials) > TRIAL_EVENT_LIMIT:
            self._unarrived_trials.popitem(last=False)

    def _trial_event(self, trial: int, agent: str, what: str) -> None:
        self.trial_events.setdefault(trial, []).append((agent, what))
        while len(self.trial_events) > TRIAL_EVENT_LIMIT:
            self.trial_events.popitem(last=False)

    def _verdict(self, trial_no: int, event: Event) -> None:
        """The runner's labels and outcomes: the authority over local verdicts."""
        if isinstance(event, LabelEvent):
            target = self.messages.get(event.message_id)
            try:
                label = Label(event.label)
            except ValueError:
                return
            if target is not None:
                self._set_label(target, (label, event.reason))
        elif isinstance(event, TrialOutcomeEvent):
            try:
                outcome = Outcome(event.outcome)
            except ValueError:
                return
            trial = self.trials.get(trial_no)
            if trial is not None and trial.authoritative:
                return
            self._finish(trial_no, outcome, event.depth, authoritative=True)
            self.trials[trial_no].reason = event.reason
            if outcome is Outcome.BUS_FAULT:
                self._unarrived(trial_no)
            else:
                self._pending.pop(trial_no, None)


#: The policy panel's figures of an agent, as `_count` adds to them.
POLICY_FIGURES = ("steps", "retries", "exhausted", "guard_blocks", "loop_stops", "model_errors")


def _figures(agent: AgentView) -> list[int]:
    return [getattr(agent, f) for f in POLICY_FIGURES]


def _count(agent: AgentView, trial: int, event: Event) -> None:
    """What one agent event changes in its agent's figures (the policy panel's)."""
    match event:
        case AgentStart():
            agent.working.add(trial)
        case ModelCall():
            agent.steps += 1
        case RetryScheduled():
            agent.retries += 1
        case ModelError(code=code, retry=retry):
            agent.last_error = str(code)
            agent.model_errors += 1
            if retry:
                agent.retries += 1
        case ToolCallEvent(ok=False, code=code) if code:
            agent.last_error = str(code)
        case RetriesExhausted(code=code):
            agent.exhausted += 1
            agent.last_error = str(code)
        case GuardBlock(code=code):
            agent.guard_blocks += 1
            agent.last_error = str(code)
        case LoopStop(code=code):
            agent.loop_stops += 1
            if code:
                agent.last_error = str(code)
        case BreakerChange(tool=tool, frm=frm, to=to):
            agent.breaker_steps.append(BreakerStep(trial, tool, frm, to))
            with contextlib.suppress(ValueError):
                agent.breakers[tool] = BreakerState(to)


def describe(agent: str, event: Event) -> str:
    """The status line's words for one agent event."""
    match event:
        case ToolCallEvent(ok=ok, code=code, tool=tool):
            return f"{agent}: tool {tool} {'ok' if ok else f'failed {code}'}"
        case BreakerChange(tool=tool, frm=frm, to=to):
            return f"{agent}: breaker {tool} {frm} → {to}"
        case (
            RetryScheduled(tool=tool, code=code)
            | RetriesExhausted(tool=tool, code=code)
            | GuardBlock(tool=tool, code=code)
        ):
            return f"{agent}: {event.type} {tool or ''} {code or ''}".rstrip()
        case LoopStop(code=code) | ModelError(code=code):
            return f"{agent}: {event.type}  {code or ''}".rstrip()
    return f"{agent}: {event.type}"
