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
TUI scores locally). `close(trial)` hands a scored trial's state back and makes later
copies of its messages inert. Pure: no clock, no I/O, no asyncio.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from errorflow.bus import topics
from errorflow.bus.envelope import Envelope


@dataclass
class TrialState:
    """What arrived of one trial: its messages in arrival order, who sent a final result."""

    messages: list[Envelope] = field(default_factory=list)
    finals: set[str] = field(default_factory=set)
    _ids: set[str] = field(default_factory=set, repr=False)
    #: ids named in some message's provenance that have not arrived yet
    _awaited: set[str] = field(default_factory=set, repr=False)

    def add(self, env: Envelope) -> bool:
        """File one message; False (and nothing changes) for a copy already held."""
        if env.id in self._ids:
            return False
        self.messages.append(env)
        self._ids.add(env.id)
        self._awaited.discard(env.id)
        self._awaited.update(d for d in env.derived_from if d not in self._ids)
        if env.recipient == topics.RUNNER:
            self.finals.add(env.sender)
        return True

    def is_done(self, terminals: frozenset[str]) -> bool:
        """Every terminal's final result and everything they were derived from arrived.
        No known terminals (a topology not learnt yet): never done."""
        return bool(terminals) and terminals <= self.finals and not self._awaited


class TrialTracker:
    """The trials of one run, by number. `terminals` may be replaced when the topology
    becomes known (the TUI learns it from the roll call)."""

    def __init__(self, terminals: Iterable[str] = ()) -> None:
        self.terminals = frozenset(terminals)
        self._trials: dict[int, TrialState] = {}
        self._closed: set[int] = set()

    def add(self, env: Envelope) -> bool:
        """File a task or result message; True if its trial is done now. A message of a
        closed trial (a late copy after scoring) is ignored."""
        if env.trial in self._closed:
            return False
        state = self._trials.setdefault(env.trial, TrialState())
        state.add(env)
        return state.is_done(self.terminals)

    def is_done(self, trial: int) -> bool:
        state = self._trials.get(trial)
        return state is not None and state.is_done(self.terminals)

    def is_closed(self, trial: int) -> bool:
        return trial in self._closed

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
