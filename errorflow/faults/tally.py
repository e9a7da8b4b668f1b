"""Counting where configured faults fired over a run's trials, and where they never did.

A fault that did not fire in a trial is no evidence about it: a summary says in how many
trials each configured fault fired (and how often), and in how many it never did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import NotRequired, TypedDict

from errorflow.protocol.envelope import Envelope, Kind


class FaultCount(TypedDict):
    """One configured fault (or kind) over a run's trials."""

    fired: int  # trials in which it fired at least once
    never: int  # trials in which it never fired
    times: int  # what it struck (sends, calls, messages), over every trial
    #: Trials whose counts never arrived (a bus fault or an infrastructure fault ended
    #: them; the results that carry the counts were lost): neither fired nor never.
    unknown: NotRequired[int]


class ToolFaultCount(FaultCount):
    """One configured fault counted by its place (`tools.kpi.faults[0]`,
    `agents.writer.model.faults[1]`) over a run's trials; `times` counts the calls (the
    model's attempts) it struck."""

    kind: str


def fault_counts(
    keys: Sequence[str], fired: Mapping[int, Mapping[str, int]], trials: int
) -> dict[str, FaultCount]:
    """Each configured fault: in how many of `trials` it fired, and how often (`fired`:
    the trials where any fault fired, by trial, times by key)."""
    tally = Tally(keys)
    for trial, seen in fired.items():
        tally.add(trial, seen)
    tally.trials = trials
    return tally.counts() or {}


class Tally:
    """What fired over a run's trials, by key: counted as each trial finishes, so a long
    run holds a few numbers a key, not a record a trial. `per_trial` also keeps what
    fired in each trial (for those that need it: which trials a bus fault struck)."""

    def __init__(self, keys: Sequence[str], *, per_trial: bool = False) -> None:
        self.keys = list(keys)
        #: Faults fired per trial, by key (only trials where some fired; `per_trial`).
        self.fired: dict[int, dict[str, int]] = {}
        self.per_trial = per_trial
        self.trials = 0
        self.unknown = 0  # trials whose counts never arrived
        self._trials_hit: dict[str, int] = dict.fromkeys(self.keys, 0)
        self._times: dict[str, int] = dict.fromkeys(self.keys, 0)

    def add(self, trial: int, seen: Mapping[str, int]) -> None:
        self.trials += 1
        if not seen:
            return
        if self.per_trial:
            self.fired[trial] = dict(seen)
        for key, times in seen.items():
            if times and key in self._times:
                self._trials_hit[key] += 1
                self._times[key] += times

    def add_unknown(self) -> None:
        """A trial whose counts never arrived."""
        self.unknown += 1

    def counts(self) -> dict[str, FaultCount] | None:
        if not self.keys:
            return None
        out: dict[str, FaultCount] = {}
        for key in self.keys:
            count: FaultCount = {
                "fired": self._trials_hit[key],
                "never": self.trials - self._trials_hit[key],
                "times": self._times[key],
            }
            if self.unknown:
                count["unknown"] = self.unknown
            out[key] = count
        return out


class PlacedFaultTally:
    """Configured faults counted by their place in the scenario, from the counts each
    agent sends with its result (`read`: a result payload's counts by place), so the
    runner needs only a trial's messages, whatever process each agent ran in. Two
    faults of one kind stay apart."""

    def __init__(
        self, kinds: Mapping[str, str], read: Callable[[Mapping[str, object]], dict[str, int]]
    ) -> None:
        #: Each configured fault's place and kind, in file order.
        self.kinds = dict(kinds)
        self.tally = Tally(list(self.kinds))
        self._read = read

    def finish(self, trial: int, messages: Sequence[Envelope], known: bool = True) -> None:
        """A trial is over; `known`: its results arrived (else its counts are lost)."""
        if not self.kinds:
            return
        if known:
            self.tally.add(trial, self.seen(trial, messages))
        else:
            self.tally.add_unknown()

    def seen(self, trial: int, messages: Sequence[Envelope]) -> Counter[str]:
        """What fired in the trial, by place."""
        seen: Counter[str] = Counter()
        for m in messages:
            if m.kind is not Kind.RESULT and m.kind is not Kind.TASK:
                continue  # (a manager's dispatch and a send-back are tasks an agent sent)
            for path, n in self._read(m.payload).items():
                if path in self.kinds:
                    seen[path] += n
        return seen

    def counts(self) -> dict[str, ToolFaultCount] | None:
        counts = self.tally.counts()
        if counts is None:
            return None
        return {path: {**c, "kind": self.kinds[path]} for path, c in counts.items()}
