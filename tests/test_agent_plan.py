"""One agent's view of a run (errorflow.scenario.agent_plan): read once from the scenario,
frozen, and holding what the agent acts on."""

from __future__ import annotations

import dataclasses

import pytest

from errorflow import api
from errorflow.scenario.agent_plan import AgentPlan
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.run_time import arrival
from tests.conftest import scenario

NEEDS = [
    {"id": "a", "tool": "q", "wording": "a", "value": "m.a"},
    {"id": "b", "tool": "q", "wording": "b", "value": "m.b", "sources": ["q2"]},
]


def _scenario(agents: dict[str, object], **extra: object) -> dict[str, object]:
    return {
        "name": "view",
        "seed": 4,
        "trials": 6,
        "world": {"metrics": {"m.a": 1, "m.b": 2}},
        "tools": {
            "q": {"kind": "metric_store"},
            "q2": {"kind": "metric_store"},
            "out": {"kind": "report_sink"},
        },
        "agents": agents,
        "task": {"prompt": "a and b", "needs": NEEDS},
        **extra,
    }


CHAIN = {
    "r": {"role": "researcher", "tools": ["q", "q2"], "sends_to": ["w"]},
    "w": {"role": "writer", "tools": ["out"], "sends_to": ["v"]},
    "v": {"role": "reviewer", "tools": ["q"], "returns_to": "w", "max_revisions": 2},
}


def test_an_agent_sees_its_own_spec_its_place_and_the_runs_settings() -> None:
    s = api.load_scenario(_scenario(CHAIN, propagation="implicit"))
    w = AgentPlan.of(s, "w")
    assert w.spec is s.agents["w"] and w.policy is s.agents["w"].policy.config
    assert (w.seed, w.propagation, w.time_scale, w.run_scoped) == (4, "implicit", 0.0, False)
    assert w.members == {"r", "w", "v"} and w.upstream == ("r",)
    assert w.returners == ("v",) and w.last_revision == 2
    assert w.delivers == {"out"} and w.task is s.task
    assert w.peers == () and w.rounds == 0 and w.decides
    r = AgentPlan.of(s, "r")
    assert r.upstream == () and r.returners == () and r.last_revision == 0
    assert r.delivers == frozenset() and r.bus_faults is None
    assert r.need_tools("b.item") == ["q", "q2"] and r.need_tools("zz") == []


def test_the_identity_is_the_agent_facing_part_of_the_public_scenario() -> None:
    s = scenario("contamination")
    plan = RunPlan(s).for_agent("writer")
    assert dict(plan.identity) == identity.agent_view(identity.public(s))
    assert "trials" not in plan.identity  # the runner's alone: an agent may join any
    with pytest.raises(TypeError):
        plan.identity["seed"] = 1  # type: ignore[index]


def test_a_discussion_seat() -> None:
    agents = {
        "x": {"role": "researcher", "tools": ["q"], "peers": ["y", "z"]},
        "y": {"role": "researcher", "tools": ["q"], "peers": ["z"]},
        "z": {"role": "researcher", "tools": ["q"]},
    }
    s = api.load_scenario(_scenario(agents, discussion={"rounds": 2, "decides": ["z"]}))
    z = AgentPlan.of(s, "z")
    assert z.peers == ("x", "y") and z.rounds == 2 and z.decides
    x = AgentPlan.of(s, "x")
    assert x.peers == ("y", "z") and not x.decides and x.deciding_peers == ("z",)


def test_a_run_scoped_plan_knows_when_each_trial_arrives() -> None:
    arrivals = {"process": "poisson", "rate_per_s": 3}
    s = api.load_scenario(_scenario(CHAIN, arrivals=arrivals))
    plan = AgentPlan.of(s, "r")
    assert plan.run_scoped and len(plan.arrivals) == 6
    assert [plan.arrival(t) for t in range(-1, 8)] == [arrival(s, t) for t in range(-1, 8)]
    flat = AgentPlan.of(api.load_scenario(_scenario(CHAIN)), "r")
    assert flat.arrivals == () and flat.arrival(3) == 0.0


def test_the_bus_faults_are_the_scenarios() -> None:
    s = api.load_scenario(_scenario(CHAIN, bus={"drop": {"p": 0.2}}))
    assert AgentPlan.of(s, "w").bus_faults == s.bus.plan(s.seed, s.time_scale)


def test_a_plan_is_frozen_and_made_once_per_agent() -> None:
    run = RunPlan(scenario("contamination"))
    plan = run.for_agent("writer")
    assert run.for_agent("writer") is plan and plan.name == "writer"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 3  # type: ignore[misc]
    with pytest.raises(KeyError):
        run.for_agent("nobody")
