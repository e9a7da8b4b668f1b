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
trial_work.py), named by its trace id, which the runner gave it; the runner moves the
trial's deadline by that time (errorflow/runtime/run_driver.py). An agent in a process of
its own (`--external-agents`) says its process's time outside in its heartbeat
(`report`, errorflow/agents/presence.py), and the runner adds what each agent said
(`told`): seen a heartbeat late, so a wait there shows to the runner within about a
second of its start.
"""

from __future__ import annotations

import contextvars
import math
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: The trials remembered: the oldest ones with nothing outside are forgotten past it, so
#: a process serving trials for a long time (an agent process) stays flat. Far above the
#: trials any process has waiting outside at once.
REMEMBERED_TRIALS = 4_096
#: What a heartbeat reports: the trials with a call outside now, or whose calls changed
#: within this many seconds (a heartbeat or two: the time of a call that just ended is
#: said more than once).
REPORT_WINDOW_S = 3.0
#: Trials a heartbeat reports at most (those waiting first): far above the
#: trials an agent has waiting at once, and a heartbeat stays small.
REPORTED_TRIALS = 512


@dataclass
class _Spans:
    spent_s: float = 0.0  # the closed spans, in all
    #: The calls outside now: when each must be back by (inf: bounded by its own waits).
    ends: list[float] = field(default_factory=list)
    since: float = 0.0  # when the calls outside last changed
    #: What processes of agents said of the trial, by process: its time outside, and
    #: until when a call it said was outside counts as still there (-inf: none was).
    told: dict[str, tuple[float, float]] = field(default_factory=dict)

    def open_s(self, now: float) -> float:
        """The time counted since `since`: up to now, or to the last bound of the calls
        outside (none counts past its own)."""
        if not self.ends:
            return 0.0
        return max(0.0, min(now, max(self.ends)) - self.since)

    def out_now(self, now: float) -> bool:
        """Whether a call of ours is outside now, within its bound."""
        return bool(self.ends) and now < max(self.ends)

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
        """The trial's time outside so far, a call still there included, with what
        agents in other processes said of theirs (added up: their waits, one after
        another along a chain of agents, do not overlap ours)."""
        spans = self._trials.get(trace_id)
        if spans is None:
            return 0.0
        told = sum(spent for spent, _ in spans.told.values()) if spans.told else 0.0
        return spans.spent_s + spans.open_s(self._clock()) + told

    def waiting(self, trace_id: str) -> bool:
        """Whether a call of the trial is outside now, within its bound (here, or as an
        agent elsewhere said in its last heartbeat)."""
        spans = self._trials.get(trace_id)
        if spans is None:
            return False
        now = self._clock()
        return spans.out_now(now) or any(now < until for _, until in spans.told.values())

    def report(self) -> list[tuple[str, float, bool]]:
        """For a heartbeat: (trace id, time outside, a call outside now) of the trials
        with a call outside now or changed within `REPORT_WINDOW_S`: those with a call
        outside first, then the most recently changed, at most `REPORTED_TRIALS`. Only
        this process's own calls."""
        now = self._clock()
        recent = [
            (bool(spans.ends), spans.since, trace_id, spans)
            for trace_id, spans in self._trials.items()
            if spans.ends or now - spans.since <= REPORT_WINDOW_S
        ]
        recent.sort(key=lambda r: r[:2], reverse=True)
        return [
            (trace_id, spans.spent_s + spans.open_s(now), spans.out_now(now))
            for _, _, trace_id, spans in recent[:REPORTED_TRIALS]
        ]

    def told(self, source: str, trace_id: str, spent_s: float, waiting: bool, for_s: float) -> None:
        """What a process of agents (`source`: its `process_token`) said of the trial in
        a heartbeat: its time outside so far, and whether a call is outside now (counted
        as still there for `for_s`, until its next heartbeat should have come)."""
        spans = self._trials.get(trace_id)
        if spans is None:
            self._forget_oldest()
            spans = self._trials[trace_id] = _Spans()
        until = self._clock() + for_s if waiting else -math.inf
        spans.told[source] = (spent_s, until)

    def forget(self, trace_id: str) -> None:
        """The trial is over (scored): a run in this process that gives a trial the same
        trace id again starts from nothing. A call of it still out ends unseen."""
        self._trials.pop(trace_id, None)

    def _forget_oldest(self) -> None:
        if len(self._trials) < REMEMBERED_TRIALS:
            return
        now = self._clock()
        for trace_id, spans in self._trials.items():  # oldest first: dicts keep their order
            if not spans.ends and all(until <= now for _, until in spans.told.values()):
                del self._trials[trace_id]
                return


#: The process's: its agents time their calls in it, its runner reads it.
OUTSIDE = OutsideTime()
_TOKEN = secrets.token_hex(8)


def process_token() -> str:
    """This process, as a heartbeat names where its time outside was counted: every
    agent of one process reports the same calls (the runner keeps one report a
    process), and a runner hearing its own process's reports has them already."""
    return f"{_TOKEN}-{os.getpid()}"  # a forked child is a process of its own


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
