"""Which simulated-model profiles a run used, and where their parameters came from:
the lines a run prints, the `profiles` key of its JSON and of a report, and the table
`errorflow profiles` shows."""

from __future__ import annotations

from pydantic import ValidationError
from rich.table import Table

from errorflow.core.display import for_terminal
from errorflow.reports.blocks import Block, Heading, Para, TableBlock
from errorflow.scenario.loader import ScenarioError, load_json
from errorflow.scenario.provenance.view import ProfileView
from errorflow.scenario.spec.model import Scenario

ProfileJson = dict[str, object]


def views_by_agent(scenario: Scenario) -> dict[str, ProfileView]:
    """The profile each agent with a simulated model acts on."""
    return {
        name: agent.model.profile_view()
        for name, agent in scenario.agents.items()
        if agent.model.backend == "simulated"
    }


def view_json(view: ProfileView) -> ProfileJson:
    values = view.values
    return {
        "name": view.name,
        "source": view.source,
        "counts": view.counts(),
        "parameters": {
            f: {"origin": o.kind, "says": o.summary(), "value": values[f]}
            for f, o in view.origins.items()
        },
        "set_in_scenario": list(view.overridden),
    }


def profiles_doc(scenario: Scenario) -> dict[str, ProfileJson]:
    """By agent: the profile its simulated model used (a run's `profiles` key)."""
    return {name: view_json(v) for name, v in views_by_agent(scenario).items()}


def _counts_text(view: ProfileView) -> str:
    c = view.counts()
    parts = [f"{n} {kind}" for kind, n in c.items() if n]
    return ", ".join(parts)


def profile_lines(scenario: Scenario) -> list[str]:
    """One line per profile used: who used it and how much of it was measured."""
    users: dict[str, list[str]] = {}
    views: dict[str, ProfileView] = {}
    for name, view in views_by_agent(scenario).items():
        users.setdefault(view.label, []).append(name)
        views[view.label] = view
    return [
        f"simulated model profile {label} for {', '.join(agents)}: parameters "
        f"{_counts_text(views[label])} (`errorflow profiles` shows each)"
        for label, agents in users.items()
    ]


def profile_table(view: ProfileView) -> Table:
    table = Table(title=for_terminal(view.label, limit=None), title_justify="left")
    table.add_column("parameter")
    table.add_column("value", justify="right")
    table.add_column("origin")
    table.add_column("where it came from", overflow="fold")
    values = view.values
    for field, origin in view.origins.items():
        value = values[field]
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        table.add_row(field, shown, origin.kind, for_terminal(origin.summary(), limit=None))
    return table


def stored_profiles(scenario_json: str) -> dict[str, ProfileJson]:
    """A stored run's profiles (none when its stored scenario no longer loads)."""
    try:
        return profiles_doc(load_json(scenario_json))
    except (ScenarioError, ValidationError, ValueError):
        return {}


def profile_blocks(profiles: dict[str, ProfileJson]) -> list[Block]:
    """A report's section: each profile used, every parameter and where it came from."""
    if not profiles:
        return []
    blocks: list[Block] = [Heading(2, "Simulated model profiles")]
    shown: dict[str, list[str]] = {}
    for agent, doc in profiles.items():
        shown.setdefault(f"{doc['name']} ({doc['source']})", []).append(agent)
    for label, agents in shown.items():
        doc = profiles[agents[0]]
        params = doc["parameters"]
        assert isinstance(params, dict)
        rows = [[name, f"{p['value']:g}", p["origin"], p["says"]] for name, p in params.items()]
        blocks += [
            Para((f"{label}, used by {', '.join(agents)}:",)),
            TableBlock(["parameter", "value", "origin", "where it came from"], rows),
        ]
    return blocks
