"""Cross-references of discussions, defences and agent faults: each problem at the
path that names it (errorflow.scenario.checks.references collects them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from errorflow.scenario.checks.reference_problem import Reference, unknown

if TYPE_CHECKING:
    from errorflow.scenario.spec.model import Scenario


def discussion_problems(s: Scenario) -> Iterator[Reference]:
    members = [n for n in s.agents if s.peers_of(n)]
    for name, agent in s.agents.items():
        for i, peer in enumerate(agent.peers):
            loc = ("agents", name, "peers", i)
            if peer == name:
                yield Reference(loc, f"agent {name!r} lists itself as a peer", peer)
            elif peer not in s.agents:
                yield Reference(loc, unknown("agent", peer, s.agents), peer)
    for i, name in enumerate(s.discussion.decides or []):
        if name not in s.agents:
            yield Reference(("discussion", "decides", i), unknown("agent", name, s.agents), name)
    for name in members:
        agent = s.agents[name]
        if not s.decides(name) and s.downstream_of(name):
            yield Reference(
                ("agents", name, "sends_to"),
                f"{name!r} does not decide (discussion.decides), so its answer goes only to "
                "its peers; remove its sends_to or let it decide",
                s.downstream_of(name),
            )
        returners = [n for n, a in s.agents.items() if a.returns_to == name]
        if agent.returns_to is not None or returners:
            yield Reference(
                ("agents", name, "peers"),
                f"{name!r} discusses with peers and takes part in a revision (returns_to); "
                "an agent does one or the other",
                agent.peers,
            )


def defence_problems(s: Scenario) -> Iterator[Reference]:
    recipients = [*s.agents, "runner"]
    for name, agent in s.agents.items():
        if agent.inspector is not None:
            for i, tool in enumerate(agent.inspector.tools):
                if tool not in s.tools:
                    msg = unknown("tool", tool, s.tools) + " (define it under tools:)"
                    yield Reference(("agents", name, "inspector", "tools", i), msg, tool)
        for i, fault in enumerate(agent.faults):
            for j, target in enumerate(getattr(fault, "to", None) or []):
                if target not in recipients:
                    msg = unknown("recipient", target, recipients)
                    yield Reference(("agents", name, "faults", i, "to", j), msg, target)
