"""What the timeline (errorflow.reports.timeline) reads of a stored run: its events that
make up calls and breaker states, and from its scenario the services, which tool each
one backs, their outage windows and each agent's breaker scope.

Outage windows come from the run's summary when it has one (it holds the flapping
process's windows as drawn), else from the scenario's fixed windows.
"""

from __future__ import annotations

import json
from pathlib import Path

from errorflow.protocol.events import Event, parse_event
from errorflow.reports.timeline import RunEvents
from errorflow.scenario.problems import ScenarioError
from errorflow.scenario.stored import load_stored
from errorflow.store.opening import connect_ro
from errorflow.store.readers import StoredRun

#: The event kinds the timeline is built from.
TYPES = ("tool_call", "retry", "call_refused", "breaker")

_SQL = (
    "SELECT trial, json_extract(envelope, '$.payload') FROM events WHERE run_id = ? AND type IN"
    f" ({', '.join('?' * len(TYPES))}) ORDER BY trial, seq"
)


def run_events(db: Path, run: StoredRun) -> RunEvents | None:
    """The run's events and scenario facts; None when its stored scenario no longer
    loads (written by another version): no timeline then."""
    try:
        scenario = load_stored(run["scenario_json"], f"stored run {run['run_id']}")
    except (ScenarioError, ValueError):
        return None
    summary = run.get("summary")
    stored = (summary.get("services") if summary else None) or {}
    services = {
        name: [
            (o["start_s"], o["end_s"]) for o in stored[name]["outages"]
        ] if name in stored else [(w.start_s, w.end_s) for w in spec.outages]
        for name, spec in scenario.services.items()
    }  # fmt: skip
    agents = scenario.agents.items()
    return RunEvents(
        events=read_events(db, run["run_id"]),
        services=services,
        tool_services={t: s.service for t, s in scenario.tools.items() if s.service},
        tool_breaker_scope={a: spec.policy.config.breaker.scope for a, spec in agents},
        model_breaker_scope={a: spec.policy.config.model_breaker.scope for a, spec in agents},
    )


def read_events(db: Path, run_id: str) -> list[tuple[int, Event]]:
    """(trial, event) of the kinds in TYPES, each agent's in the order it sent them."""
    with connect_ro(db) as conn:
        rows = conn.execute(_SQL, (run_id, *TYPES)).fetchall()
    out = []
    for trial, payload in rows:
        event = parse_event(json.loads(payload)) if payload else None
        if event is not None:
            out.append((int(trial), event))
    return out
