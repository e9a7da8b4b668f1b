"""How long each trial has been waiting on a model server: the time the runner's trial
timeout does not count.

The trial timeout (`--trial-timeout`) is how the runner tells a trial whose messages were
lost (a bus fault) from one still at work. A trial whose agent waits on a real model
server is at work, however long it waits: for a free `--max-concurrency` slot behind
other trials' requests, for an `--rpm` or 429 pause, for a busy server, or for the reply.
Each of those waits ends on its own (a request within `--model-timeout`, a 429 within
`max_pacing_s`, a slot when the requests before it end), and one that ends in failure
fails the trial as an infrastructure fault. Counted against the trial timeout, they
made trials queued behind `--max-concurrency 1` bus faults, which they were not.

So every request a trial's backend sends to a server is timed here, from the moment it
asks for a slot to the moment its reply (or failure) is back, per (experiment, trial):
the union of those spans, so two agents of one trial waiting at once count once. The
runner of the same process adds that time to the trial's deadline
(errorflow/runtime/run_driver.py). Agents in other processes (`--external-agents`) are
not seen here: their waits still count against the runner's timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: (the experiment's digest, trial): errorflow/models/exchange.py `Experiment`.
TrialKey = tuple[str, int]

#: The trials remembered: the oldest ones with no request at a server are forgotten past
#: it, so a process serving trials for a long time (an agent process) stays flat. Far
#: above the trials any process has at a model server at once.
REMEMBERED_TRIALS = 4_096


@dataclass
class _Spans:
    spent_s: float = 0.0  # the closed spans, in all
    open: int = 0  # requests at a server now
    since: float = 0.0  # when the open span began (`open` went from 0 to 1)


class ServerTime:
    """Per trial, the seconds any of its requests was at a model server."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._trials: dict[TrialKey, _Spans] = {}

    @contextmanager
    def at_server(self, key: TrialKey) -> Iterator[None]:
        """The span of one request: from asking for a slot until it is answered or fails."""
        spans = self._trials.get(key)
        if spans is None:
            self._forget_oldest()
            spans = self._trials[key] = _Spans()
        if spans.open == 0:
            spans.since = self._clock()
        spans.open += 1
        try:
            yield
        finally:
            spans.open -= 1
            if spans.open == 0:
                spans.spent_s += self._clock() - spans.since

    def spent_s(self, key: TrialKey) -> float:
        """The trial's time at a server so far, a request still there included."""
        spans = self._trials.get(key)
        if spans is None:
            return 0.0
        if spans.open:
            return spans.spent_s + self._clock() - spans.since
        return spans.spent_s

    def waiting(self, key: TrialKey) -> bool:
        """Whether a request of the trial is at a server now."""
        spans = self._trials.get(key)
        return spans is not None and spans.open > 0

    def _forget_oldest(self) -> None:
        if len(self._trials) < REMEMBERED_TRIALS:
            return
        for key, spans in self._trials.items():  # oldest first: dicts keep their order
            if not spans.open:
                del self._trials[key]
                return
