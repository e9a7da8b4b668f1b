"""When is a trial over? The one rule, shared by the runner and the TUI.

Theory of operation
-------------------
A trial's task and result messages arrive in any order (agents work concurrently, a
resend can overtake, a reviewer can send work back for another round). A trial is
*done* when

* every terminal agent (one whose results go to the runner) has sent the runner a
  result, and
* every message named in the `derived_from` (provenance) of a message held has arrived
  too, so the scorer sees the whole graph a final answer was built from.

`TrialTracker.add(envelope)` files one message under its trial and says whether the trial
is done now; the caller decides what "done" sets off (the runner resolves a future, the
TUI scores locally). Any message may be the one that completes its trial, a task the
caller sent itself too (the results it set off can be filed before its send returns), so
every call's answer is acted on. `close(trial)` hands a scored trial's state back and
makes later copies of its messages inert. Pure: no clock, no I/O, no asyncio.

A sender says one thing per trial, recipient, kind and round. A second message with a
new id under the same four (a restarted agent redoing work whose first result did
arrive) is a copy like a resend: the first one is what its recipient acted on, and the
trial is scored (and its costs counted) once.

Bus faults (a scenario's `bus:` block) are filed here too, from their events: which
fired on the trial's messages (`bus_fault`), and a message their resends could not get
through (`undelivered`): such a trial can never be done, it is a `bus_fault` with that
reason at once.

What a restarted agent lost (`TrialTracker.lost_inputs`): the inputs of each round it had
received but not answered (a result to every agent it sends to, or work sent back), and
round 0's with a revision, which is answered from them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from errorflow.agents.inputs import round_of
from errorflow.bus.seen_seqs import SeqRuns
from errorflow.protocol import topics
from errorflow.protocol.envelope import Envelope, Kind

#: What a sender says once per trial: (sender, recipient, kind, round).
_Said = tuple[str, str, Kind, int]


@dataclass
class TrialState:
    """What arrived of one trial: its messages in arrival order, who sent a final result."""

    messages: list[Envelope] = field(default_factory=list)
    finals: set[str] = field(default_factory=set)
    #: Bus faults fired on the trial's messages, by kind, and why one of its messages
    #: can never arrive (the first such reason).
    bus_faults: Counter[str] = field(default_factory=Counter)
    undelivered: str | None = None
    _ids: set[str] = field(default_factory=set, repr=False)
    #: ids named in some message's provenance that have not arrived yet
    _awaited: set[str] = field(default_factory=set, repr=False)
    _said: set[_Said] = field(default_factory=set, repr=False)

    def add(self, env: Envelope) -> bool:
        """File one message; False (and nothing changes) for a copy already held."""
        said = (env.sender, env.recipient, env.kind, round_of(env))
        if env.id in self._ids or said in self._said:
            return False
        self.messages.append(env)
        self._ids.add(env.id)
        self._said.add(said)
        self._awaited.discard(env.id)
        self._awaited.update(d for d in env.derived_from if d not in self._ids)
        if env.recipient == topics.RUNNER:
            self.finals.add(env.sender)
        return True

    def is_done(self, terminals: frozenset[str]) -> bool:
        """Every terminal's final result and everything they were derived from arrived.
        No known terminals (a topology not learnt yet): never done."""
        return bool(terminals) and terminals <= self.finals and not self._awaited

    def lost_inputs(self, agent: str, targets: frozenset[str]) -> list[Envelope]:
        """The inputs `agent` must be given again after a restart, in arrival order:
        those of the rounds it has not answered (`targets`: where its results go), and
        round 0's with a revision."""
        inputs = [m for m in self.messages if m.recipient == agent]
        answered: set[int] = set()
        reached: dict[int, set[str]] = {}
        for m in self.messages:
            if m.sender != agent:
                continue
            if m.kind is Kind.TASK:  # work sent back: the round before it is answered
                answered.add(round_of(m) - 1)
            else:
                reached.setdefault(round_of(m), set()).add(m.recipient)
        answered.update(r for r, got in reached.items() if targets <= got)
        todo = {round_of(m) for m in inputs} - answered
        if any(m.kind is Kind.TASK and round_of(m) in todo - {0} for m in inputs):
            todo.add(0)  # a revision is answered from round 0's inputs
        return [m for m in inputs if round_of(m) in todo]


class TrialTracker:
    """The trials of one run, by number. `terminals` may be replaced when the topology
    becomes known (the TUI learns it from the roll call)."""

    def __init__(self, terminals: Iterable[str] = ()) -> None:
        self.terminals = frozenset(terminals)
        self._trials: dict[int, TrialState] = {}
        self._closed = SeqRuns()  # trials close nearly in order: a few runs

    def add(self, env: Envelope) -> bool:
        """File a task or result message; True if its trial is done now. A message of a
        closed trial (a late copy after scoring) is ignored."""
        if env.trial in self._closed:
            return False
        state = self._trials.setdefault(env.trial, TrialState())
        state.add(env)
        return state.is_done(self.terminals)

    def bus_fault(self, trial: int, kind: str) -> None:
        """A bus fault fired on one of the trial's messages (ignored once it is closed)."""
        if trial not in self._closed:
            self._trials.setdefault(trial, TrialState()).bus_faults[kind] += 1

    def undelivered(self, trial: int, reason: str) -> bool:
        """A message of the trial will never arrive; True if the trial is open (and so
        ends now, as a bus fault with the first such reason)."""
        if trial in self._closed:
            return False
        state = self._trials.setdefault(trial, TrialState())
        state.undelivered = state.undelivered or reason
        return True

    def state(self, trial: int) -> TrialState | None:
        """What arrived of an open trial so far (None: not seen, or closed)."""
        return self._trials.get(trial)

    def is_done(self, trial: int) -> bool:
        state = self._trials.get(trial)
        return state is not None and state.is_done(self.terminals)

    def is_closed(self, trial: int) -> bool:
        return trial in self._closed

    def lost_inputs(self, agent: str, targets: frozenset[str]) -> list[Envelope]:
        """What a restarted `agent` must be given again, over every open trial."""
        trials = (self._trials[t] for t in sorted(self._trials))
        return [m for state in trials for m in state.lost_inputs(agent, targets)]

    def messages(self, trial: int) -> list[Envelope]:
        """The trial's messages in arrival order (empty for a trial not seen)."""
        state = self._trials.get(trial)
        return state.messages if state is not None else []

    def close(self, trial: int) -> TrialState:
        """Forget a finished trial (memory stays flat over long runs) and ignore whatever
        of it arrives later; its state is returned."""
        self._closed.add(trial)
        return self._trials.pop(trial, None) or TrialState()

    @property
    def open_trials(self) -> list[int]:
        return sorted(self._trials)
