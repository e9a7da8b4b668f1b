"""The options of a run: the broker or bus, the store, its ids and key, its timeouts and
callbacks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from errorflow.agents.agent import OnTrace
from errorflow.bus.transport import Bus
from errorflow.bus.url import BrokerURL
from errorflow.runtime.liveness import DEFAULT_GRACE_S, SILENCE_S
from errorflow.scoring.score import TrialScore
from errorflow.store.opening import DEFAULT_DB

#: How long a trial's final result is waited for (wall seconds).
DEFAULT_TRIAL_TIMEOUT_S = 120.0


@dataclass
class RunOptions:
    """How a run is run: where, into which store, watched how. What is run (trials,
    seed, propagation) is the plan's (errorflow.scenario.run_plan)."""

    # None: the run is held in this process (an in-process bus, nothing to connect to),
    # unless something outside it must join: then the embedded broker (`needs_broker`).
    broker: BrokerURL | None = None
    bus: Bus | None = None  # a ready bus (tests, in-process sweeps); overrides broker
    db_path: Path = DEFAULT_DB
    run_id: str | None = None
    external_agents: bool = False  # agents are `errorflow agent` processes
    resume: bool = False  # run_id names an interrupted run: finish its missing trials
    keep_messages: bool = True  # RunResult.messages; off for long runs (memory stays flat)
    presence_timeout_s: float = 30.0
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    # How long a participant (an agent, the broker) that went away is waited for before
    # the run ends; an agent restarted meanwhile rejoins.
    grace_s: float = DEFAULT_GRACE_S
    silence_s: float = SILENCE_S  # an agent process silent this long is missed
    group_id: str | None = None  # several runs of one comparison or sweep
    label: str | None = None  # this run's arm or cell within its group
    on_trial: Callable[[TrialScore], None] | None = None
    on_trace: OnTrace | None = None
    # The run key that signs every envelope of the run (None: a fresh one). It never
    # travels on the bus; `errorflow agent` processes get it from a file or the env.
    run_key: bytes | None = None
    # A shard of the run (errorflow.runtime.workers): only these trial numbers run here.
    only_trials: tuple[int, ...] | None = None
    # Start the embedded broker with no `broker` given, though no participant is outside
    # this process: to watch the run's bus, or to measure the broker path.
    embedded_broker: bool = False

    @property
    def needs_broker(self) -> bool:
        """Whether a run with no broker given starts the embedded one: external agents
        join through it; everything else runs on an in-process bus, with the same
        outcomes (every draw comes from the seed, never from the transport)."""
        return self.external_agents or self.embedded_broker
