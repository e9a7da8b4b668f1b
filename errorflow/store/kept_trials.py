"""A resumed run's kept trials counted again from the store.

A run counts what fired in each trial (tool, model, agent and bus faults) and its agents'
policy decisions as the trial finishes, in memory; an interrupted run took those counts
with its process, while its scores stay in the store. So `--resume` reads the kept
trials' tasks, results and bus-fault events back and counts them again, and the summary
covers every trial, not only the ones run after the interruption. The messages its
recorder rejected are counted again the same way (`kept_rejects`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from errorflow.faults.tally import FaultCount, Tally
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.events import BusFaultFired, parse_event
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.result_tallies import ResultTallies
from errorflow.scoring.score import TrialScore, trial_policy
from errorflow.scoring.summary import UNCOSTED
from errorflow.store.opening import connect_ro
from errorflow.store.trial_store import MESSAGES_SQL

#: Trial numbers read a query at a time (memory stays flat over a long run).
CHUNK = 500
BUS_FAULTS_SQL = (
    "SELECT trial, envelope FROM events"
    " WHERE run_id = ? AND trial BETWEEN ? AND ? AND type = 'bus_fault'"
)


@dataclass
class KeptTrial:
    trial: int
    messages: list[Envelope] = field(default_factory=list)  # its tasks and results
    bus_faults: Counter[str] = field(default_factory=Counter)  # fired, by kind


def kept_trials(path: Path, run_id: str, trials: Iterable[int]) -> Iterator[KeptTrial]:
    """Each of `trials` as the store has it, in trial order."""
    wanted = sorted(set(trials))
    with connect_ro(path) as conn:
        for i in range(0, len(wanted), CHUNK):
            part = wanted[i : i + CHUNK]
            args = (run_id, part[0], part[-1])
            found = {t: KeptTrial(t) for t in part}
            for trial, text in conn.execute(MESSAGES_SQL, args):
                if trial in found:
                    found[trial].messages.append(Envelope.model_validate_json(text))
            for trial, text in conn.execute(BUS_FAULTS_SQL, args):
                event = parse_event(Envelope.model_validate_json(text).payload)
                if trial in found and type(event) is BusFaultFired:
                    found[trial].bus_faults[event.kind] += 1
            yield from found.values()


def count_kept(
    kept: Iterable[KeptTrial],
    scores: Mapping[int, TrialScore],
    tallies: ResultTallies,
    bus: Tally | None = None,
) -> dict[int, TrialScore]:
    """Feed the kept trials to the run's `tallies` (and its `bus` tally, when the run
    has bus faults); their `scores` with the policy decisions their messages report."""
    out = {}
    for k in kept:
        tallies.finish(k.trial, k.messages, scores[k.trial].outcome not in UNCOSTED)
        if bus is not None:
            bus.add(k.trial, k.bus_faults)
        out[k.trial] = replace(scores[k.trial], policy=trial_policy(k.messages))
    return out


def kept_fault_counts(
    scenario: Scenario, kept: Iterable[KeptTrial], scores: Mapping[int, TrialScore]
) -> tuple[dict[int, TrialScore], dict[str, dict[str, FaultCount]]]:
    """The kept trials' scores with their policy, and their fault counts by summary key
    (as a shard of `--workers` reports its own)."""
    tallies = ResultTallies(scenario)
    plan = scenario.bus.plan(scenario.seed, scenario.time_scale)
    bus = Tally(plan.kinds, per_trial=True) if plan is not None else None
    rescored = count_kept(kept, scores, tallies, bus)
    counts = tallies.counts()
    if bus is not None and (fired := bus.counts()) is not None:
        counts["bus_faults"] = fired
    return rescored, counts


def kept_rejects(path: Path, run_id: str) -> Counter[str]:
    """The messages the run's earlier processes rejected, by reason (those of trials run
    again were forgotten with them: errorflow.store.runs.resume_run)."""
    with connect_ro(path) as conn:
        rows = conn.execute(
            "SELECT reason, COUNT(*) FROM rejects WHERE run_id = ? GROUP BY reason", (run_id,)
        )
        return Counter({str(reason): int(n) for reason, n in rows})
