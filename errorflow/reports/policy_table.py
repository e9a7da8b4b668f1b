"""The policy decisions of a run, per agent: the table `run`, `show` and `report` print.

One row per agent with any decision: retries (and how many ran out) with the backoff
they waited, breaker transitions (open / half-open / closed), calls refused before they
ran (by an open circuit, the rate limiter, the bulkhead), guard blocks by kind and loop
stops by reason. Totals over the run's measured trials (`metrics.policy`,
errorflow.scoring.summary); narrow enough for 80 columns.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table

from errorflow.core.display import for_terminal

#: Refusals before a call ran, by counter (errorflow.agents.policy_tally) and word.
REFUSED = (
    ("refused_open", "open"),
    ("limiter_rejected", "limiter"),
    ("bulkhead_rejected", "bulkhead"),
)


def policy_rows(policy: Mapping[str, Mapping[str, float]]) -> list[list[str]]:
    """Per agent: retries (with their backoff and how many ran out), breaker
    transitions, refusals, guard blocks and loop stops."""
    rows = []
    for agent, c in policy.items():
        retries = _n(c.get("retries", 0.0) + c.get("model_retries", 0.0))
        if c.get("backoff_s"):
            retries += f", {c['backoff_s']:.1f}s"
        if c.get("retries_exhausted"):
            retries += f", {_n(c['retries_exhausted'])} out"
        transitions = [c.get(f"breaker_{s}", 0.0) for s in ("open", "half_open", "closed")]
        breaker = "/".join(_n(t) for t in transitions) if any(transitions) else "-"
        refused = ", ".join(f"{word} {_n(c[k])}" for k, word in REFUSED if c.get(k)) or "-"
        rows.append([for_terminal(agent), retries, breaker, refused,
                     _by_prefix(c, "guard_"), _by_prefix(c, "stop_")])  # fmt: skip
    return rows


def policy_table(
    policy: Mapping[str, Mapping[str, float]], title: str = "Policy decisions"
) -> Table:
    table = Table(title=title, title_justify="left")
    for heading, justify in (
        ("agent", "left"),
        ("retries", "right"),
        ("breaker o/h/c", "right"),
        ("refused", "left"),
        ("guard blocks", "left"),
        ("loop stops", "left"),
    ):
        table.add_column(heading, justify=justify)  # type: ignore[arg-type]
    for row in policy_rows(policy):
        table.add_row(*row)
    return table


def _by_prefix(counts: Mapping[str, float], prefix: str) -> str:
    found = [(k[len(prefix) :], v) for k, v in sorted(counts.items()) if k.startswith(prefix)]
    return ", ".join(f"{for_terminal(k)} {_n(v)}" for k, v in found) or "-"


def _n(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
