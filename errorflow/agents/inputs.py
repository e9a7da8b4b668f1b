"""Collecting a trial's inputs: when an agent has what its topology promises.

An agent waits, per (trial, round), for one message from every sender it expects (the
runner's task, or a result from each upstream agent); then that round is ready, once.
The bus delivers at least once, so resends of an input already held, or of a round
already started, are dropped. A reviewer that sends work back (a revision task for
round n + 1) is answered from the round-0 inputs, kept until the trial's last round; so
is a manager's round 1, which waits for a result from each of its delegates.
Pure bookkeeping: no I/O, the agent starts the work and counts the rejections.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from errorflow.protocol import result
from errorflow.protocol.envelope import Envelope, Kind

#: Trials whose original inputs a reviewer may still send back (far above any number of
#: trials in flight, which is at most 1,024).
ROUND0_KEEP = 4096
#: Started rounds remembered to drop resends; past this, only the recent trials are kept.
#: A second line only: the endpoint already drops every (sender, seq) it has seen, for
#: the whole run (errorflow.bus.seen_seqs), so a small window keeps memory flat.
DONE_KEEP = 4_096
DONE_WINDOW_TRIALS = 2_048
#: Highest round number accepted from the wire (anything else reads as round 0).
MAX_ROUND = 100


@dataclass(frozen=True)
class Ready:
    """A round with all its inputs: start its work."""

    trial: int
    round: int
    inputs: list[Envelope]


@dataclass(frozen=True)
class Rejected:
    """A message that cannot be an input of ours (`reason` is the endpoint's counter)."""

    reason: str


def round_of(env: Envelope) -> int:
    value = result.round_of(env.payload)
    return value if 0 <= value <= MAX_ROUND else 0


class InputCollector:
    def __init__(
        self,
        expected: list[str],
        returners: list[str],
        last_round: int,
        peers: list[str] | None = None,
        delegates: list[str] | None = None,
    ) -> None:
        """`expected`: the senders of a round's inputs; `returners`: reviewers that may
        send work back; `last_round`: the highest round any of them can ask for;
        `peers`: a discussion's members, the senders of every round after round 0;
        `delegates`: a manager's, the senders of its round 1 (with round 0's inputs)."""
        self.expected = expected
        self.peers = peers or []
        self.delegates = delegates or []
        self.returners = returners
        self.last_round = last_round
        self._waiting: dict[tuple[int, int], dict[str, Envelope]] = {}  # by sender
        self._started: set[tuple[int, int]] = set()
        self._round0: OrderedDict[int, list[Envelope]] = OrderedDict()

    def accept(self, env: Envelope) -> Ready | Rejected | None:
        """Ready when `env` completes a round; None when it is held or a resend."""
        round_ = round_of(env)
        key = (env.trial, round_)
        if key in self._started:
            return None  # a resend of work already started
        if env.kind is Kind.TASK and env.sender in self.returners:
            base = self._round0.get(env.trial)
            if base is None:
                return Rejected("revision_without_inputs")
            return self._ready(env.trial, round_, [*base, env])
        expected = self.expected
        if round_ > 0 and (self.peers or self.delegates):
            expected = self.peers or self.delegates
        if env.sender not in expected:
            return Rejected("unexpected_sender")
        waiting = self._waiting.setdefault(key, {})
        if env.sender in waiting:
            return None  # a resend of an input we already hold
        waiting[env.sender] = env
        if not all(s in waiting for s in expected):
            return None
        received = list(waiting.values())
        if self.delegates and round_ > 0:
            base = self._round0.get(env.trial)
            if base is None:
                return Rejected("results_without_task")
            return self._ready(env.trial, round_, [*base, *received])
        if (self.returners or self.delegates) and round_ == 0:
            self._round0[env.trial] = received
            while len(self._round0) > ROUND0_KEEP:  # trials approved at once never
                self._round0.popitem(last=False)  # come back: keep a bounded window
        return self._ready(env.trial, round_, received)

    def finished(self, trial: int, round_: int) -> None:
        """The round's work is over: forget its inputs (and, after the trial's last
        possible round, the round-0 inputs kept for revisions)."""
        self._waiting.pop((trial, round_), None)
        if round_ >= self.last_round:
            self._round0.pop(trial, None)

    def _ready(self, trial: int, round_: int, inputs: list[Envelope]) -> Ready:
        self._started.add((trial, round_))
        if len(self._started) > DONE_KEEP:  # bounded memory over very long runs
            floor = trial - DONE_WINDOW_TRIALS
            self._started = {k for k in self._started if k[0] >= floor}
        return Ready(trial, round_, inputs)
