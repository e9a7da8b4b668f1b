"""The runner's side of bus faults: their events filed per trial, the trials they end,
and the run's count of where each configured kind fired and where it never did.

The endpoints inject the faults and say so on the bus (`bus_fault` before the message
it struck, `bus_undelivered` when the resends gave up: errorflow.bus.endpoint); the
runner subscribes to the run's events only when the scenario has a `bus:` block, and
hands each to `file`. A trial with a message that can never arrive ends at once as a
`bus_fault` with the endpoint's reason ("researcher→writer: dropped 7 of 7 sends"); a
trial that times out says which faults had fired on it.
"""

from __future__ import annotations

from collections.abc import Mapping

from errorflow.faults.bus import BusFaultPlan
from errorflow.faults.tally import FaultCount, Tally
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.events import BusFaultFired, BusUndelivered, parse_event
from errorflow.runtime.trial_tracker import TrialState, TrialTracker
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.summary import BusRecovery


class BusFaultTally:
    def __init__(self, plan: BusFaultPlan | None, tracker: TrialTracker) -> None:
        self.plan = plan
        self.tracker = tracker
        #: Faults fired per trial, by kind (trials where some fired), and trials counted.
        self.tally = Tally(plan.kinds if plan is not None else (), per_trial=True)

    @property
    def fired(self) -> dict[int, dict[str, int]]:
        return self.tally.fired

    @property
    def active(self) -> bool:
        return self.plan is not None

    def file(self, env: Envelope) -> int | None:
        """File one event; the trial it ends now (a message that cannot arrive), if any."""
        event = parse_event(env.payload)
        if type(event) is BusFaultFired:
            self.tracker.bus_fault(env.trial, event.kind)
        elif type(event) is BusUndelivered and self.tracker.undelivered(env.trial, event.reason):
            return env.trial
        return None

    def score(self, trial: int) -> TrialScore | None:
        """The trial's score when a message of it can never arrive (and it is not done
        anyway: what did arrive is all it needs)."""
        state = self.tracker.state(trial)
        if state is None or state.undelivered is None or self.tracker.is_done(trial):
            return None
        return TrialScore(trial, Outcome.BUS_FAULT, 0, reason=state.undelivered)

    def timeout_reason(self, trial: int, reason: str) -> str:
        """A timed-out trial's reason, with the bus faults that fired on it."""
        state = self.tracker.state(trial)
        if state is None or not state.bus_faults:
            return reason
        fired = ", ".join(f"{k} {n}" for k, n in sorted(state.bus_faults.items()))
        return f"{reason} (bus faults fired: {fired})"

    def finish(self, trial: int, state: TrialState) -> None:
        """A trial is over: what fired on it is kept (only while faults are configured)."""
        if self.plan is not None:
            self.tally.add(trial, state.bus_faults)

    def counts(self) -> dict[str, FaultCount] | None:
        """Per configured kind: the trials it fired in and those it never did."""
        return self.tally.counts()


def bus_recovery(
    fired: Mapping[int, Mapping[str, int]], scores: Mapping[int, TrialScore]
) -> BusRecovery:
    """Of the trials a bus fault struck, those the acks and resends recovered (the trial
    finished) and those it ended (`bus_fault`, with its reason)."""
    struck = [t for t in fired if t in scores]
    lost = sum(scores[t].outcome is Outcome.BUS_FAULT for t in struck)
    return {"struck": len(struck), "recovered": len(struck) - lost, "lost": lost}
