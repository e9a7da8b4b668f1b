"""What the graph shows: per agent and per edge, what has travelled so far (pure).

A node counts its agent's verdicts per *trial* (the label of the last result it sent in
each trial), so its counts add up to the trials it took part in and the final agent's
counts are the tallies. An edge counts *messages* (a reviewer's send-back makes two on
one edge in one trial) and, of them, how many were contaminated, contained, or carried
a failure at all. Labels can be corrected later (the runner's verdict overrides the
local one), so every count is moved, never only added: `relabel` takes the old label
back out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from errorflow.policies.breaker import BreakerState
from errorflow.scoring.score import Label


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


class EdgeKind(StrEnum):
    SENDS = "sends"  # results (sends_to / waits_for)
    RETURNS = "returns"  # a reviewer's work sent back (returns_to)


@dataclass(frozen=True)
class BreakerStep:
    """One breaker transition, for the policy panel's timeline."""

    trial: int
    tool: str
    frm: str
    to: str


@dataclass
class AgentView:
    name: str
    tools: list[str] = field(default_factory=list)
    steps: int = 0
    retries: int = 0
    exhausted: int = 0  # retries given up
    guard_blocks: int = 0
    loop_stops: int = 0
    model_errors: int = 0
    breakers: dict[str, BreakerState] = field(default_factory=dict)
    breaker_steps: list[BreakerStep] = field(default_factory=list)
    last_error: str | None = None
    confidence: float | None = None
    last_label: Label | None = None
    working: set[int] = field(default_factory=set)  # trials started, not yet answered
    labels: Counter[Label] = field(default_factory=Counter)  # per message
    #: per trial: the label of the last result the agent sent in it
    trial_labels: dict[int, Label] = field(default_factory=dict)
    counts: Counter[Label] = field(default_factory=Counter)  # of trial_labels
    last_sent: dict[int, str] = field(default_factory=dict)  # trial -> message id
    origins: int = 0  # messages whose own tool calls failed: failures start here
    batch: int = -1  # the UI tick of its last result (the node lights up)

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
        if not self.counts:
            return self.state
        order = [Label.CONTAMINATED, Label.CONTAINED, Label.CLEAN]
        best = max(order, key=lambda lb: (self.counts[lb], -order.index(lb)))
        return STATE_OF_LABEL[best]

    def sent(self, trial: int, message_id: str) -> None:
        """A result of this agent arrived: it is now the one its trial counts."""
        self.last_sent[trial] = message_id
        previous = self.trial_labels.pop(trial, None)
        if previous is not None:
            self.counts[previous] -= 1

    def forget(self, trial: int) -> None:
        """A trial whose results never reached the runner: its verdict counts no more
        (the runner labels none of its messages)."""
        previous = self.trial_labels.pop(trial, None)
        if previous is not None:
            self.counts[previous] -= 1

    def relabel(self, trial: int, message_id: str, old: Label | None, new: Label) -> None:
        if old is not None:
            self.labels[old] -= 1
        self.labels[new] += 1
        self.last_label = new
        if self.last_sent.get(trial) != message_id:
            return  # an earlier round's message: the trial counts its last one
        previous = self.trial_labels.get(trial)
        if previous is not None:
            self.counts[previous] -= 1
        self.trial_labels[trial] = new
        self.counts[new] += 1


@dataclass
class EdgeView:
    src: str
    dst: str
    kind: EdgeKind = EdgeKind.SENDS
    messages: int = 0
    failures: int = 0  # messages that carried a failure (own or upstream, said or not)
    labels: Counter[Label] = field(default_factory=Counter)
    label: Label | None = None  # of the last message labelled on it
    batch: int = -1  # the UI tick in which the last message travelled (for the pulse)
    last_id: str = ""  # the last message that travelled it
    order: int = -1  # when, among all crossings of the run (several share a tick)

    def crossed(self, message_id: str, tick: int, order: int, *, failure: bool) -> None:
        self.messages += 1
        self.failures += failure
        self.batch, self.last_id, self.order = tick, message_id, order

    def relabel(self, message_id: str, old: Label | None, new: Label) -> None:
        if old is not None:
            self.labels[old] -= 1
        self.labels[new] += 1
        if message_id == self.last_id or self.label is None:
            self.label = new
