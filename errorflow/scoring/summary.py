"""Summaries over trials: outcome counts and rates with 95 % Wilson intervals, costs
per trial (over the trials that delivered their messages), amplification against a
fault-free baseline.

Infra-fault trials (errorflow's own infrastructure failed) are counted in `outcomes`
and nowhere else: every rate, its interval, pass^k, the depths, the costs per trial and
the paired differences are over the trials that measured something.

The shapes are TypedDicts, not classes: a summary is stored as JSON (`runs.summary_json`)
and printed by `--json` exactly as built here, and readers index it like the dict it is.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NotRequired, TypedDict

from errorflow.core.costs import ALL_COST_KEYS, Costs
from errorflow.faults.tally import FaultCount, ToolFaultCount
from errorflow.scoring.bootstrap import BOOTSTRAP_MAX_N, mean_interval, mean_intervals
from errorflow.scoring.credit import add_credit
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.score_table import OrderedScores
from errorflow.scoring.service_load import ServiceJson
from errorflow.scoring.stats import (
    PairedDifference,
    paired_difference,
    pass_hat_k,
    wilson,
)

#: Outcomes that measured nothing: counted, never rated.
NOT_MEASURED: frozenset[Outcome] = frozenset({Outcome.INFRA_FAULT})
#: Outcomes whose results did not all arrive: their costs, policy decisions and fault
#: counts (carried by the results) are not known.
UNCOSTED: frozenset[Outcome] = NOT_MEASURED | {Outcome.BUS_FAULT}

#: Outcomes with a rate (by value, in `Outcome` order).
RATED: tuple[Outcome, ...] = tuple(o for o in Outcome if o not in NOT_MEASURED)


class Rate(TypedDict):
    """A rate over the measured trials; both None when no trial measured anything (a
    run of infra faults only): not a 0 % with an interval of everything."""

    rate: float | None
    ci95: list[float] | None  # [low, high], rounded to 4 places


#: Count of trials by outcome value, every outcome present (0 when none).
OutcomeCounts = dict[str, int]

#: Mean cost per trial by cost field (`Costs.to_wire` keys), rounded to 4 places.
PerTrialCosts = dict[str, float]

#: The costs given a 95 % interval (bootstrap over trials): `tokens` is input + output.
INTERVAL_COSTS = ("backend_calls", "model_calls", "tokens", "retries", "sim_seconds")

# Functional syntax: "pass^3" is not an identifier.
Metrics = TypedDict(
    "Metrics",
    {
        "rates": dict[str, Rate],  # by outcome value, the rated ones (`RATED`)
        "success_rate": float | None,  # None: no trial measured (as in `Rate`)
        "contamination_rate": float | None,
        "mean_depth": float,
        "max_depth": int,
        "per_trial": PerTrialCosts,
        # [low, high] of the mean per trial, by INTERVAL_COSTS key (only with costed trials)
        "per_trial_ci95": NotRequired[dict[str, list[float]]],
        "pass^3": float | None,  # None below 3 trials
        # Policy decisions by agent, summed over the measured trials (only when any).
        "policy": NotRequired[dict[str, dict[str, float]]],
        # Successes a fault struck (errorflow.scoring.credit): the system recovered.
        "recovered": NotRequired[int],
        # Per fact of the ground truth: trials that got it right / wrong / abstained,
        # over the trials with a final answer (only when any).
        "credit": NotRequired[dict[str, dict[str, int]]],
    },
)


class BusRecovery(TypedDict):
    """The trials a bus fault struck: recovered by acks and resends, or lost."""

    struck: int
    recovered: int
    lost: int  # ended as `bus_fault`


class RunSummary(TypedDict):
    trials: int
    outcomes: OutcomeCounts
    metrics: Metrics
    services: NotRequired[dict[str, ServiceJson]]  # load on each service (when any)
    bus_faults: NotRequired[dict[str, FaultCount]]  # by kind (a `bus:` block)
    bus_recovery: NotRequired[BusRecovery]
    agent_faults: NotRequired[dict[str, FaultCount]]  # by `agent.kind`
    tool_faults: NotRequired[dict[str, ToolFaultCount]]  # by place in the scenario
    model_faults: NotRequired[dict[str, ToolFaultCount]]  # by place in the scenario


class Amplification(TypedDict):
    """Cost per trial divided by the fault-free baseline's, on the two axes of seed 000
    (None: no baseline, or the baseline spent nothing on that axis)."""

    backend_calls: float | None
    model_calls: float | None


#: Paired differences of two arms on the same trials, by outcome value (success and
#: contaminated).
PairedOutcomes = dict[str, PairedDifference]


class RunJson(TypedDict):
    """One run as `errorflow run --json` prints it: its identity and its summary."""

    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    broker: str
    outcomes: OutcomeCounts
    metrics: Metrics
    rejects: dict[str, int]  # rejected bus messages by reason
    amplification: NotRequired[Amplification]  # a run measured against a baseline
    services: NotRequired[dict[str, ServiceJson]]  # load on each service (when any)
    bus_faults: NotRequired[dict[str, FaultCount]]  # by kind (a `bus:` block)
    bus_recovery: NotRequired[BusRecovery]
    agent_faults: NotRequired[dict[str, FaultCount]]  # by `agent.kind`
    tool_faults: NotRequired[dict[str, ToolFaultCount]]  # by place in the scenario
    model_faults: NotRequired[dict[str, ToolFaultCount]]  # by place in the scenario


def summarize(scores: Iterable[TrialScore]) -> RunSummary:
    """The run's outcomes and metrics from its scores, in trial order. One pass, holding
    counts, and five costs per trial as machine doubles for their intervals while the
    bootstrap may need them; past `BOOTSTRAP_MAX_N` costed trials of scores that can be
    read again (a lazily read `ScoreTable` view of 100,000 trials), the normal interval
    reads one cost at a time from them instead."""
    counts: Counter[str] = Counter()
    total, costed, n = Costs(), 0, 0
    depth_sum, depth_n, depth_max = 0, 0, 0
    successes = 0
    spread: dict[str, array[float]] | None = {k: array("d") for k in INTERVAL_COSTS}
    again = isinstance(scores, Sequence)
    policy: dict[str, Counter[str]] = {}
    recovered = 0
    credits: dict[str, dict[str, int]] = {}
    for s in scores:
        counts[s.outcome.value] += 1
        if s.outcome in NOT_MEASURED:
            continue
        n += 1
        # Costs are known only for trials whose messages arrived: a bus fault has none,
        # and counting it as zero would make every other trial look cheaper.
        if s.outcome is not Outcome.BUS_FAULT:
            total, costed = total + s.costs, costed + 1
            if spread is not None:
                _add_spread(spread, s.costs)
                if again and costed > BOOTSTRAP_MAX_N:
                    spread = None
        if s.outcome is Outcome.CONTAMINATED:
            depth_sum, depth_n = depth_sum + s.depth, depth_n + 1
            depth_max = max(depth_max, s.depth)
        successes += s.outcome is Outcome.SUCCESS
        recovered += s.recovered
        if s.credit:
            add_credit(credits, s.credit)
        if s.outcome is not Outcome.BUS_FAULT:  # its decisions went with its results
            add_policy(policy, s)
    outcomes = {o.value: counts.get(o.value, 0) for o in Outcome}
    rates: dict[str, Rate] = {}
    for o in RATED:
        k = outcomes[o.value]
        low, high = wilson(k, n)
        rates[o.value] = (
            {"rate": k / n, "ci95": [round(low, 4), round(high, 4)]}
            if n
            else {"rate": None, "ci95": None}
        )
    costs = Costs(**{k: getattr(total, k) / costed for k in ALL_COST_KEYS}) if costed else Costs()
    metrics: Metrics = {
        "rates": rates,
        "success_rate": rates[Outcome.SUCCESS]["rate"],
        "contamination_rate": rates[Outcome.CONTAMINATED]["rate"],
        "mean_depth": depth_sum / depth_n if depth_n else 0.0,
        "max_depth": depth_max,
        "per_trial": {k: round(v, 4) for k, v in costs.to_wire().items()},
        "pass^3": pass_hat_k(n, successes, 3) if n >= 3 else None,
    }
    if costed:
        if spread is None:
            assert isinstance(scores, Sequence)
            intervals = {k: mean_interval(_cost_column(scores, k)) for k in INTERVAL_COSTS}
        else:
            intervals = mean_intervals(spread)
        metrics["per_trial_ci95"] = {
            k: [round(x, 4) for x in interval] for k, interval in intervals.items()
        }
    totals = rounded_policy(policy)
    if totals:
        metrics["policy"] = totals
    metrics["recovered"] = recovered
    if credits:
        metrics["credit"] = credits
    return {"trials": sum(counts.values()), "outcomes": outcomes, "metrics": metrics}


def _add_spread(spread: dict[str, array[float]], costs: Costs) -> None:
    for key, values in spread.items():
        values.append(_cost(costs, key))


def _cost(costs: Costs, key: str) -> float:
    return costs.input_tokens + costs.output_tokens if key == "tokens" else getattr(costs, key)


def _cost_column(scores: Sequence[TrialScore], key: str) -> array[float]:
    """One interval cost of every costed trial, in trial order (as `_add_spread` keeps
    them)."""
    if isinstance(scores, OrderedScores):  # read from the table's columns
        return array("d", (_cost(c, key) for c in scores.costs(UNCOSTED)))
    return array("d", (_cost(s.costs, key) for s in scores if s.outcome not in UNCOSTED))


def bus_recovery_line(r: BusRecovery) -> str:
    """`bus faults struck 35 trials: 35 finished all the same, 0 lost (bus_fault)` (the
    acks, resends and the receivers' dedup recover them: a doubled or late message
    needs no resend)."""
    return (
        f"bus faults struck {r['struck']} trials: {r['recovered']} finished all the same, "
        f"{r['lost']} lost (bus_fault)"
    )


def bus_fault_line(
    counts: Mapping[str, FaultCount], what: str = "bus faults", unit: str = "sends"
) -> str:
    """`bus faults: drop fired in 37 of 200 trials (41 sends), never in 163; ...` (a
    tool fault's kind follows its place: `tools.kpi.faults[0] stale fired in ...`)."""
    cells = []
    for name, c in counts.items():
        n = c["fired"] + c["never"]
        kind = c.get("kind")
        label = f"{name} {kind}" if isinstance(kind, str) else name
        times = f"{c['times']} {unit}"
        if kind == "bad_args":  # it fires on the task, not on a call: counted in tasks
            times = f"an identifier withheld from {c['times']} tasks"
        cells.append(
            f"{label} fired in {c['fired']} of {n} trials ({times}), never in {c['never']}"
        )
    unknown = max((c.get("unknown", 0) for c in counts.values()), default=0)
    lost = f" (not known in {unknown} trials a bus or infra fault ended)" if unknown else ""
    return f"{what}: " + "; ".join(cells) + lost


def add_policy(out: dict[str, Counter[str]], score: TrialScore) -> None:
    for agent, counts in score.policy.items():
        out.setdefault(agent, Counter()).update(counts)


def rounded_policy(out: Mapping[str, Counter[str]]) -> dict[str, dict[str, float]]:
    return {a: {k: round(v, 6) for k, v in sorted(c.items())} for a, c in sorted(out.items())}


def amplification(
    per_trial: Mapping[str, float], baseline: Mapping[str, float] | None
) -> Amplification:
    """Backend and model calls per trial against the fault-free baseline's (same seeds)."""

    def ratio(key: str) -> float | None:
        base = (baseline or {}).get(key)
        return round(per_trial[key] / base, 4) if base else None

    return {"backend_calls": ratio("backend_calls"), "model_calls": ratio("model_calls")}


def paired_outcomes(a: Sequence[str], b: Sequence[str]) -> PairedOutcomes:
    """Paired differences a − b (outcome values of the same trials, in trial order), for
    success and for contamination; a pair where either arm measured nothing is left
    out."""
    if len(a) != len(b):
        raise ValueError("paired arms must have the same number of trials")
    unmeasured = {o.value for o in NOT_MEASURED}
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if unmeasured.isdisjoint((x, y))]
    return {
        o.value: paired_difference([x == o for x, _ in pairs], [y == o for _, y in pairs])
        for o in (Outcome.SUCCESS, Outcome.CONTAMINATED)
    }
