"""Summaries over trials: outcome counts and rates with 95 % Wilson intervals, costs
per trial (over the trials that delivered their messages)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from errorflow.scoring.score import COST_KEYS, Outcome, TrialScore
from errorflow.scoring.stats import pass_at_k, wilson


def summarize(scores: list[TrialScore]) -> dict[str, Any]:
    n = len(scores)
    counts = Counter(s.outcome.value for s in scores)
    outcomes = {o.value: counts.get(o.value, 0) for o in Outcome}
    rates = {}
    for o, k in outcomes.items():
        low, high = wilson(k, n)
        rates[o] = {"rate": k / n if n else 0.0, "ci95": [round(low, 4), round(high, 4)]}
    # Costs are known only for trials whose messages arrived: a bus fault has none, and
    # counting it as zero would make every other trial look cheaper.
    costed = [s for s in scores if s.outcome is not Outcome.BUS_FAULT]
    costs = {
        k: (sum(s.costs.get(k, 0.0) for s in costed) / len(costed) if costed else 0.0)
        for k in COST_KEYS
    }
    depths = [s.depth for s in scores if s.outcome is Outcome.CONTAMINATED]
    success = [s.outcome is Outcome.SUCCESS for s in scores]
    return {
        "trials": n,
        "outcomes": outcomes,
        "metrics": {
            "rates": rates,
            "success_rate": rates.get("success", {}).get("rate", 0.0),
            "contamination_rate": rates.get("contaminated", {}).get("rate", 0.0),
            "mean_depth": sum(depths) / len(depths) if depths else 0.0,
            "max_depth": max(depths, default=0),
            "per_trial": {k: round(v, 4) for k, v in costs.items()},
            "pass^3": pass_at_k(success, 3) if n >= 3 else None,
        },
    }
