"""A pure model of one run, built from the envelopes seen on the bus (no Textual here).

Theory of operation
-------------------
`RunModel.apply(env)` is the only mutator; widgets read the model after a batch of
`apply` calls, so the model never renders and the UI never computes.

* Result messages are labelled as they arrive (`label_message`), not at the end of the
  trial: a message's "touched" bit depends only on its own trace and on the messages it
  was derived from, which arrived before it. That is what lets contamination travel
  along the graph's arrows live.
* A trial is scored locally (`score_trial`) as soon as every terminal agent has sent
  its final result and every message those were derived from is in, the same rule the
  runner uses. The runner's own `label` / `trial_outcome` events (published at the end
  of the run) override the local verdicts: they are the authority, and the only
  source when no scenario is known (attaching to a run we cannot score).
* Without a scenario the topology is learnt from the result messages seen.
"""

from __future__ import annotations

import contextlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from errorflow.bus import topics
from errorflow.bus.envelope import Envelope, Kind
from errorflow.policies.breaker import BreakerState
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
    messages: list[Envelope] = field(default_factory=list)
    finals: set[str] = field(default_factory=set)
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
        self.terminals = set(scenario.terminal_agents()) if scenario else set()
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
        return Rate(self.outcomes[outcome], self.done)

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
            if env.payload.get("action") == "end" and env.sender == topics.RUNNER:
                self.ended = True
                self.last_event = "runner: end of run"
            elif (
                env.payload.get("action") == "roll_call"
                and env.sender == topics.RUNNER
                and self.scenario is None
                and isinstance(env.payload.get("scenario"), dict)
            ):
                self._adopt(env.payload["scenario"])
        else:
            self._message(env)

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
        self.terminals = set(scenario.terminal_agents())
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
        trial = self.trials.setdefault(env.trial, TrialView())
        trial.messages.append(env)
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
        if env.recipient == topics.RUNNER:
            trial.finals.add(env.sender)
            if self.scenario is None:
                self.terminals.add(env.sender)
        else:
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
        self._check_done(env.trial)

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

    def _check_done(self, trial_no: int) -> None:
        trial = self.trials[trial_no]
        if trial.outcome is not None or not self.terminals or self.scenario is None:
            return
        if not self.terminals <= trial.finals:
            return
        have = {m.id for m in trial.messages}
        if not all(d in have for m in trial.messages for d in m.derived_from):
            return
        assert self.truth is not None
        score = score_trial(self.scenario, self.truth, trial_no, trial.messages)
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
        p: dict[str, Any] = env.payload
        kind = str(p.get("type", ""))
        if env.sender == topics.RUNNER:
            if kind == "label":
                target = self.messages.get(str(p.get("message_id")))
                try:
                    label = Label(str(p.get("label")))
                except ValueError:
                    return
                if target is not None:
                    self._set_label(target, label)
            elif kind == "trial_outcome":
                try:
                    outcome = Outcome(str(p.get("outcome")))
                except ValueError:
                    return
                self._finish(env.trial, outcome, int(p.get("depth") or 0), authoritative=True)
            return
        agent = self._agent(str(p.get("agent", env.sender)))
        self.last_event = _describe(agent.name, kind, p)
        if kind == "agent_start":
            agent.working.add(env.trial)
        elif kind == "model_call":
            agent.steps += 1
        elif kind == "retry":
            agent.retries += 1
        elif kind == "model_error":
            agent.last_error = str(p.get("code"))
            if p.get("retry"):
                agent.retries += 1
        elif kind == "tool_call":
            if not p.get("ok") and p.get("code"):
                agent.last_error = str(p.get("code"))
        elif kind in ("retries_exhausted", "guard", "loop_stop"):
            if p.get("code"):
                agent.last_error = str(p.get("code"))
        elif kind == "breaker":
            with contextlib.suppress(ValueError):
                agent.breakers[str(p.get("tool"))] = BreakerState(str(p.get("to")))


def _describe(agent: str, kind: str, p: dict[str, Any]) -> str:
    if kind == "tool_call":
        ok = "ok" if p.get("ok") else f"failed {p.get('code')}"
        return f"{agent}: tool {p.get('tool')} {ok}"
    if kind == "breaker":
        return f"{agent}: breaker {p.get('tool')} {p.get('from')} → {p.get('to')}"
    if kind in ("retry", "retries_exhausted", "guard", "loop_stop", "model_error"):
        return f"{agent}: {kind} {p.get('tool') or ''} {p.get('code') or ''}".rstrip()
    return f"{agent}: {kind}"
