"""Load on each service of a run: the table `run`, `show` and `report` print.

Calls per trial (against the fault-free baseline's when it ran: retry amplification),
what the service answered and refused, its peak load, and per outage the calls that
still reached it, how long after the outage the first call was answered, and the
success of the trials that arrived during and after it.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table

from errorflow.core.display import for_terminal
from errorflow.scoring.service_load import OutageJson, ServiceJson


def service_rows(
    services: Mapping[str, ServiceJson], baseline: Mapping[str, ServiceJson] | None = None
) -> list[list[str]]:
    rows = []
    for name, s in services.items():
        base = (baseline or {}).get(name)
        per = f"{s['calls_per_trial']:.2f}"
        if base is not None and base["calls_per_trial"]:
            per += f" ({s['calls_per_trial'] / base['calls_per_trial']:.2f}×)"
        refused = ", ".join(f"{k} {v}" for k, v in s["refused"].items()) or "-"
        outages = "; ".join(_outage(o) for o in s["outages"]) or "-"
        rows.append([for_terminal(name), per, str(s["answered"]), refused,
                     str(s["peak_calls_per_s"]), outages])  # fmt: skip
    return rows


def service_table(
    services: Mapping[str, ServiceJson],
    baseline: Mapping[str, ServiceJson] | None = None,
    title: str = "Services",
) -> Table:
    table = Table(title=title, title_justify="left")
    for heading in ("service", "calls/trial", "answered", "refused", "peak/s", "outages"):
        table.add_column(heading)
    for row in service_rows(services, baseline):
        table.add_row(*row)
    return table


def _outage(o: OutageJson) -> str:
    recovered = "never" if o["recovered_after_s"] is None else f"{o['recovered_after_s']:.1f}s"
    return (
        f"{o['start_s']:g}-{o['end_s']:g}s: {o['calls_during']} calls during, answered "
        f"again after {recovered}, success {_pct(o['success_during'])} during / "
        f"{_pct(o['success_after'])} after"
    )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"
