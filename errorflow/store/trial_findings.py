"""What each trial of a stored run found: its root cause's primary origin, the edges
contamination crossed and the faults that fired (for the Python API's records)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from errorflow.protocol.events import parse_event
from errorflow.scoring.fault_firing import fired_faults
from errorflow.store.opening import connect_ro
from errorflow.store.trial_store import read_range, run_meta, trace_of

#: Trials read from the store at a time (a large run is not held whole in memory).
CHUNK = 200


@dataclass(frozen=True)
class TrialFindings:
    trial: int
    #: `agent`, `kind`, `tool`, `code` of the primary origin (None: the trial did not fail).
    origin: dict[str, str | None] | None
    #: Sender → recipient of each contaminated message, as `a->b`, once each, in order.
    edges: tuple[str, ...]
    #: How many times each injected fault fired, by its path in the scenario.
    fired: dict[str, int]


def trial_findings(path: str | Path, run_id: str) -> dict[int, TrialFindings]:
    """Every stored trial's findings, by trial (empty: no such run)."""
    out: dict[int, TrialFindings] = {}
    with connect_ro(Path(path)) as conn:
        meta = run_meta(conn, run_id)
        if meta is None:
            return out
        for lo in range(0, meta.trials, CHUNK):
            for trial, rows in read_range(conn, run_id, lo, lo + CHUNK - 1).items():
                cause = trace_of(meta, rows).root_cause
                first = cause.primary if cause is not None else None
                origin = (
                    None
                    if first is None
                    else {"agent": first.agent, "kind": first.kind, "tool": first.tool,
                          "code": first.code}
                )  # fmt: skip
                edges = tuple(dict.fromkeys(f"{a}->{b}" for a, b in cause.edges)) if cause else ()
                events = [e for env in rows.events if (e := parse_event(env.payload)) is not None]
                out[trial] = TrialFindings(trial, origin, edges, dict(fired_faults(events)))
    return out
