"""A pure model of one run, built from the envelopes seen on the bus (no Textual here).

Theory of operation
-------------------
`RunModel.apply(env)` is the only mutator; widgets read the model after a batch of
`apply` calls, so the model never renders and the UI never computes.

* Result messages are labelled as they arrive (`label_message`), not at the end of the
  trial: a message's "touched" bit depends only on its own trace and on the messages it
  was derived from, which arrived before it. That is what lets contamination travel
  along the graph's arrows live.
* A trial is scored locally (`score_trial`) as soon as the `TrialTracker` says it is
  done (every terminal's final result and its provenance in): the runner's own rule,
  from the same module. The runner's own `label` / `trial_outcome` events (published
  as each trial is scored) override the local verdicts: they are the authority, and
  the only source when no scenario is known (attaching to a run we cannot score).
* Events and control messages are read through their typed contracts (`parse_event`,
  `parse_control`); an event payload no known kind parses is counted, never applied.
* Without a scenario the topology is learnt from the result messages seen.
"""

from __future__ import annotations

import contextlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum

from errorflow.bus import topics
from errorflow.bus.envelope import Envelope, Kind
from errorflow.core.control import ControlAction, End, RollCall, parse_control
from errorflow.core.events import (
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
from errorflow.policies.breaker import BreakerState
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario.model import Scenario
from errorflow.scoring.score import Label, Outcome, Truth, label_message, score_trial
from errorflow.scoring.stats import wilson

#: Messages kept for provenance; older trials are forgotten first (long sweeps).
MESSAGE_LIMIT = 50_000


class AgentState(StrEnum):
    IDLE = "idle"
    WORKING = "working"
    CLEAN = "clean"
    CONTAINED = "contained"
    CONTAMINATED = "contaminated"


STATE_OF_LABEL = {
    Label.CLEAN: AgentState.CLEAN,
    Label.CONTAINED: AgentState.CONTAINED,
    Label.CONTAMINATED: AgentState.CONTAMINATED,
}

#: Outcomes shown in the tallies (bus faults are shown only when they happen).
TALLY_OUTCOMES = (Outcome.SUCCESS, Outcome.CONTAINED, Outcome.CONTAMINATED)


@dataclass
class AgentView:
    name: str
    tools: list[str] = field(default_factory=list)
    sends_to: list[str] = field(default_factory=list)
    steps: int = 0
    retries: int = 0
    breakers: dict[str, BreakerState] = field(default_factory=dict)
    last_error: str | None = None
    confidence: float | None = None
    last_label: Label | None = None
    working: set[int] = field(default_factory=set)  # trials started, not yet answered
    labels: Counter[Label] = field(default_factory=Counter)

    @property
    def state(self) -> AgentState:
        # The latest verdict wins over "working": with many trials in flight an agent
        # is nearly always working, and the colour must say what it passes on.
        if self.last_label is not None:
            return STATE_OF_LABEL[self.last_label]
        return AgentState.WORKING if self.working else AgentState.IDLE

    @property
    def majority(self) -> AgentState:
        """The most frequent verdict over the run (ties: the worse one)."""
        if not self.labels:
            return self.state
        order = [Label.CONTAMINATED, Label.CONTAINED, Label.CLEAN]
        best = max(order, key=lambda lb: (self.labels[lb], -order.index(lb)))
        return STATE_OF_LABEL[best]


@dataclass
class EdgeView:
    src: str
    dst: str
    label: Label | None = None
    messages: int = 0
    batch: int = -1  # the UI tick in which the last message travelled (for the pulse)


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
        self.scenario = scenario
        self.propagation = propagation or (scenario.propagation if scenario else "?")
        self.total = trials if trials is not None else (scenario.trials if scenario else None)
        self.truth = Truth(scenario) if scenario else None
        self.tracker = TrialTracker(scenario.terminal_agents() if scenario else ())
        self.agents: dict[str, AgentView] = {}
        self.edges: dict[tuple[str, str], EdgeView] = {}
        if scenario is not None:
            for name, spec in scenario.agents.items():
                self._agent(name).tools = list(spec.tools)
                self._agent(name).sends_to = list(spec.sends_to)
                for t in spec.tools:
                    self._agent(name).breakers[t] = BreakerState.CLOSED
                for dst in spec.sends_to:
                    self.edges[(name, dst)] = EdgeView(name, dst)
        self.trials: dict[int, TrialView] = {}
        self.messages: OrderedDict[str, Envelope] = OrderedDict()
        self.labels: dict[str, Label] = {}
        self._touched: dict[str, bool] = {}
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
        if env.sender != topics.RUNNER or env.payload.get("action") == ControlAction.ACK:
            return
        action = parse_control(env.payload)
        if isinstance(action, End):
            self.ended = True
            self.last_event = "runner: end of run"
        elif isinstance(action, RollCall) and self.scenario is None:
            self._adopt(action.scenario)

    def _adopt(self, data: dict[str, object]) -> None:
        """An attached run names its scenario in the roll call: score it like our own."""
        try:
            scenario = Scenario.model_validate(data)
        except ValueError:
            return
        self.scenario = scenario
        self.propagation = scenario.propagation
        self.total = scenario.trials
        self.truth = Truth(scenario)
        self.tracker.terminals = frozenset(scenario.terminal_agents())
        for name, spec in scenario.agents.items():
            view = self._agent(name)
            view.tools = list(spec.tools)
            view.sends_to = list(spec.sends_to)
            for t in spec.tools:
                view.breakers.setdefault(t, BreakerState.CLOSED)
            for dst in spec.sends_to:
                self.edges.setdefault((name, dst), EdgeView(name, dst))
        self.topology_changed = True

    def _agent(self, name: str) -> AgentView:
        view = self.agents.get(name)
        if view is None:
            view = self.agents[name] = AgentView(name)
            self.topology_changed = True
        return view

    def _message(self, env: Envelope) -> None:
        self._remember(env)
        self.trials.setdefault(env.trial, TrialView())
        done = self.tracker.add(env)
        item = FeedItem(env)
        self._feed_items[env.id] = item
        self.last_event = f"{env.sender} → {env.recipient}: {env.kind.value} {env.status.value}"
        if env.kind is Kind.TASK:
            if env.recipient in self.agents or self.scenario is None:
                self._agent(env.recipient).working.add(env.trial)
            self.feed.append(item)
            return
        sender = self._agent(env.sender) if env.sender != topics.RUNNER else None
        if sender is not None:
            sender.working.discard(env.trial)
            sender.confidence = env.confidence
            if env.errors:
                sender.last_error = env.errors[0].code.value
        if env.recipient != topics.RUNNER:
            self._agent(env.recipient).working.add(env.trial)
            edge = self.edges.get((env.sender, env.recipient))
            if edge is None:
                edge = self.edges[(env.sender, env.recipient)] = EdgeView(env.sender, env.recipient)
                self._agent(env.sender).sends_to.append(env.recipient)
                self.topology_changed = True
            edge.messages += 1
            edge.batch = self.batch
        if self.truth is not None:
            touched = bool(env.payload.get("trace", {}).get("failures")) or any(
                self._touched.get(d, False) for d in env.derived_from
            )
            self._touched[env.id] = touched
            self._set_label(env, label_message(env, self.truth, touched).label)
        self.feed.append(item)
        if done:
            self._score(env.trial)

    def _set_label(self, env: Envelope, label: Label) -> None:
        previous = self.labels.get(env.id)
        if previous is label:
            return
        self.labels[env.id] = label
        agent = self.agents.get(env.sender)
        if agent is not None:
            if previous is not None:
                agent.labels[previous] -= 1
            agent.labels[label] += 1
            agent.last_label = label
        edge = self.edges.get((env.sender, env.recipient))
        if edge is not None:
            edge.label = label
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
                self._set_label(env, lb.label)
        self._finish(trial_no, score.outcome, score.depth, authoritative=False)

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
        match event:
            case AgentStart():
                agent.working.add(env.trial)
            case ModelCall():
                agent.steps += 1
            case RetryScheduled():
                agent.retries += 1
            case ModelError(code=code, retry=retry):
                agent.last_error = str(code)
                if retry:
                    agent.retries += 1
            case ToolCallEvent(ok=False, code=code) if code:
                agent.last_error = str(code)
            case RetriesExhausted(code=code) | GuardBlock(code=code) | LoopStop(code=code):
                if code:
                    agent.last_error = str(code)
            case BreakerChange(tool=tool, to=to):
                with contextlib.suppress(ValueError):
                    agent.breakers[tool] = BreakerState(to)

    def _verdict(self, trial_no: int, event: Event) -> None:
        """The runner's labels and outcomes: the authority over local verdicts."""
        if isinstance(event, LabelEvent):
            target = self.messages.get(event.message_id)
            try:
                label = Label(event.label)
            except ValueError:
                return
            if target is not None:
                self._set_label(target, label)
        elif isinstance(event, TrialOutcomeEvent):
            try:
                outcome = Outcome(event.outcome)
            except ValueError:
                return
            self._finish(trial_no, outcome, event.depth, authoritative=True)


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
