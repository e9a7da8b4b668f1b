"""How long each trial has been waiting on systems outside errorflow: the time the
runner's trial timeout does not count.

The trial timeout (`--trial-timeout`) is how the runner tells a trial whose messages were
lost (a bus fault) from one still at work. A trial whose agent waits on a real model
server or a real tool is at work, however long it waits: for a free `--max-concurrency`
slot behind other trials' requests, for an `--rpm` or 429 pause, for a busy server, for
the reply, for a Python or MCP tool to answer. Each of those waits ends on its own (a
request within `--model-timeout`, 429s within their limit, a slot when the requests
before it end, a tool call within the policy's `per_call_timeout_s`), and one that
ends in failure is the agent's or the infrastructure's, seen as such. Counted against
the trial timeout, they made trials queued behind `--max-concurrency 1`, or calling
slow tools, bus faults, which they were not.

So each such call is timed here (`outside_call`), per trial, from the moment it asks
for a slot to the moment its answer (or failure) is back: the union of those spans, so
two agents of one trial waiting at once count once. The trial is the one whose work
runs in the context (`working_on`, set by an agent's round of a trial, errorflow/agents/
trial_work.py), named by its trace id, which the runner gave it; the runner of the same
process moves the trial's deadline by that time (errorflow/runtime/run_driver.py). Agents
in other processes (`--external-agents`) are not seen here: their waits still count.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: The trials remembered: the oldest ones with nothing outside are forgotten past it, so
#: a process serving trials for a long time (an agent process) stays flat. Far above the
#: trials any process has waiting outside at once.
REMEMBERED_TRIALS = 4_096


@dataclass
class _Spans:
    spent_s: float = 0.0  # the closed spans, in all
    #: The calls outside now: when each must be back by (inf: bounded by its own waits).
    ends: list[float] = field(default_factory=list)
    since: float = 0.0  # when the calls outside last changed

    def open_s(self, now: float) -> float:
        """The time counted since `since`: up to now, or to the last bound of the calls
        outside (none counts past its own)."""
        if not self.ends:
            return 0.0
        return max(0.0, min(now, max(self.ends)) - self.since)

    def checkpoint(self, now: float) -> None:
        """Before a call goes out or comes back: what the calls outside counted so far."""
        self.spent_s += self.open_s(now)
        self.since = now


class OutsideTime:
    """Per trial (its trace id), the seconds any of its calls was outside errorflow."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._trials: dict[str, _Spans] = {}

    @contextmanager
    def span(self, trace_id: str, bound_s: float | None = None) -> Iterator[None]:
        """One call, from asking for a slot until it is answered or fails. `bound_s`: how
        long it may take (a tool's timeout): past it the call counts no more, should it
        not end (code that will not be cancelled); None: its own waits bound it."""
        spans = self._trials.get(trace_id)
        if spans is None:
            self._forget_oldest()
            spans = self._trials[trace_id] = _Spans()
        now = self._clock()
        spans.checkpoint(now)
        end = math.inf if bound_s is None else now + bound_s
        spans.ends.append(end)
        try:
            yield
        finally:
            spans.checkpoint(self._clock())
            spans.ends.remove(end)

    def spent_s(self, trace_id: str) -> float:
        """The trial's time outside so far, a call still there included."""
        spans = self._trials.get(trace_id)
        if spans is None:
            return 0.0
        return spans.spent_s + spans.open_s(self._clock())

    def waiting(self, trace_id: str) -> bool:
        """Whether a call of the trial is outside now, within its bound."""
        spans = self._trials.get(trace_id)
        return spans is not None and bool(spans.ends) and self._clock() < max(spans.ends)

    def _forget_oldest(self) -> None:
        if len(self._trials) < REMEMBERED_TRIALS:
            return
        for trace_id, spans in self._trials.items():  # oldest first: dicts keep their order
            if not spans.ends:
                del self._trials[trace_id]
                return


#: The process's: its agents time their calls in it, its runner reads it.
OUTSIDE = OutsideTime()
_WORKING_ON: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "errorflow_working_on", default=None
)


class working_on:
    """The work of one trial (its trace id) runs in this block, and in what it awaits.
    A class, not a generator: every agent's round of every trial enters one."""

    __slots__ = ("_token", "_trace_id")

    def __init__(self, trace_id: str) -> None:
        self._trace_id = trace_id

    def __enter__(self) -> None:
        self._token = _WORKING_ON.set(self._trace_id)

    def __exit__(self, *exc: object) -> None:
        _WORKING_ON.reset(self._token)


@contextmanager
def outside_call(bound_s: float | None = None) -> Iterator[None]:
    """A call to a system outside errorflow, timed for the trial whose work makes it (none
    outside a trial's work: a probe, the ground truth, calibration); `bound_s` as
    `OutsideTime.span` takes it."""
    trace_id = _WORKING_ON.get()
    if trace_id is None:
        yield
        return
    with OUTSIDE.span(trace_id, bound_s):
        yield
