"""A manager and its delegates (`agents.NAME.delegates`): each problem at the path that
names it (errorflow.scenario.checks.references collects them).

A delegate takes its task from its manager only and answers to it only, so it has no
`sends_to` or `waits_for` of its own, nobody else sends to it, and it has one manager.
A manager's own result comes in a round after its delegates' (round 1), so it cannot
also take part in a revision (`returns_to`) or a discussion (`peers`), whose rounds
count the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from errorflow.scenario.checks.reference_problem import Reference, unknown

if TYPE_CHECKING:
    from errorflow.scenario.spec.model import Scenario


def delegation_problems(s: Scenario) -> Iterator[Reference]:
    managers: dict[str, str] = {}
    for name, agent in s.agents.items():
        for i, worker in enumerate(agent.delegates):
            loc = ("agents", name, "delegates", i)
            if worker == name:
                yield Reference(loc, f"agent {name!r} delegates to itself", worker)
            elif worker not in s.agents:
                yield Reference(loc, unknown("agent", worker, s.agents), worker)
            elif worker in agent.delegates[:i]:
                yield Reference(loc, f"agent {worker!r} is named twice", worker)
            elif worker in managers:
                yield Reference(
                    loc,
                    f"{worker!r} is already a delegate of {managers[worker]!r}; a delegate "
                    "answers to one manager",
                    worker,
                )
            else:
                managers[worker] = name
                yield from _delegate_problems(s, name, worker, loc)
        if agent.delegates:
            yield from _manager_problems(s, name)


def _delegate_problems(
    s: Scenario, manager: str, worker: str, loc: tuple[str | int, ...]
) -> Iterator[Reference]:
    spec = s.agents[worker]
    back = f"its result goes back to {manager!r}"
    if spec.sends_to:
        yield Reference(
            ("agents", worker, "sends_to"),
            f"{worker!r} is a delegate of {manager!r}, so {back}; remove its sends_to",
            spec.sends_to,
        )
    if spec.waits_for:
        yield Reference(
            ("agents", worker, "waits_for"),
            f"{worker!r} is a delegate of {manager!r}, which gives it its task; remove "
            "its waits_for",
            spec.waits_for,
        )
    senders = [n for n, a in s.agents.items() if worker in a.sends_to]
    if senders:
        yield Reference(
            loc,
            f"{worker!r} is a delegate of {manager!r} and also receives from "
            f"{', '.join(senders)}; a delegate's only input is its manager's sub-task",
            worker,
        )
    waiting = [n for n, a in s.agents.items() if worker in a.waits_for]
    if waiting:  # `b: {waits_for: [w]}` is `w: {sends_to: [b]}`
        yield Reference(
            loc,
            f"{', '.join(waiting)} waits for {worker!r}, a delegate of {manager!r}, so "
            f"{back}; a delegate answers its manager only",
            worker,
        )
    if spec.peers or spec.returns_to is not None:
        field = "peers" if spec.peers else "returns_to"
        yield Reference(
            ("agents", worker, field),
            f"{worker!r} is a delegate of {manager!r}; a delegate does not discuss or "
            "send work back",
            getattr(spec, field),
        )


def _manager_problems(s: Scenario, name: str) -> Iterator[Reference]:
    agent = s.agents[name]
    returners = [n for n, a in s.agents.items() if a.returns_to == name]
    if agent.returns_to is not None or returners or s.peers_of(name):
        what = "discusses with peers" if s.peers_of(name) else "takes part in a revision"
        yield Reference(
            ("agents", name, "delegates"),
            f"{name!r} delegates and {what}; a manager's answer comes after its "
            "delegates' (a round of its own), so an agent does one or the other",
            agent.delegates,
        )
