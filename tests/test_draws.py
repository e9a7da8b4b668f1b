"""Paired draws (errorflow.core.draws): the simulated model's decisions drawn by what
is decided, so the explicit and implicit arms of a trial answer alike where they can."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from errorflow import api
from errorflow.core.draws import Draws
from errorflow.core.seeding import stream
from errorflow.models.backend import ModelRequest, NeedView, TaskTurn, UpstreamTurn
from errorflow.models.simulated import SimulatedModel
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.scenario.spec.profiles import tendencies
from tests.scenario_generator import TOOLS, WORLD

NEED = NeedView("revenue", "kpi", "name", "Q3 revenue", "rev.q3")


def test_sequential_draws_are_the_conversations_one_stream() -> None:
    draws = Draws.of_conversation(7, 3, "writer", "sequential")
    plain = stream(7, 3, "writer", "model")
    got = [draws.of("heed").random(), draws.of("fabricate", "revenue").random()]
    assert got == [plain.random(), plain.random()]


def test_paired_draws_depend_on_the_question_not_on_the_order() -> None:
    one = Draws.of_conversation(7, 3, "writer", "paired")
    two = Draws.of_conversation(7, 3, "writer", "paired")
    a = [one.of("heed").random(), one.of("fabricate", "revenue").random()]
    b = [two.of("fabricate", "revenue").random()]
    assert b[0] == a[1]
    # the second time the same decision is made about the same need is a new draw
    assert one.of("fabricate", "revenue").random() != a[1]
    assert Draws.of_conversation(7, 4, "writer", "paired").of("heed").random() != a[0]


def _invents(draws: Draws, upstream: UpstreamTurn) -> bool:
    behaviour = tendencies("small-local", {"p_heed_upstream": 0.0})
    model = SimulatedModel(behaviour, random.Random(0), draws)  # `draws` replaces the stream
    request = ModelRequest("writer", "writer", "sys", [TaskTurn("t", [NEED]), upstream], [])
    answer = asyncio.run(model.complete(request)).final
    assert answer is not None
    return any(c.key == "revenue" and c.value is not None for c in answer.claims)


def _arms(trial: int, mode: Any) -> tuple[bool, bool]:
    """Whether the writer invents the revenue: told the need failed (explicit), or
    handed an empty "nothing found" that says ok (implicit)."""
    error = {"code": "not_found", "origin": "analyst", "message": "404"}
    failed = UpstreamTurn("analyst", "failed", 0.0, [error], FinalAnswer(unresolved=["revenue"]))
    empty = UpstreamTurn("analyst", "ok", 1.0, [], FinalAnswer([Claim("revenue", None, True)]))
    explicit = _invents(Draws.of_conversation(1, trial, "writer", mode), failed)
    implicit = _invents(Draws.of_conversation(1, trial, "writer", mode), empty)
    return explicit, implicit


def test_paired_draws_invent_in_the_explicit_arm_only_where_the_implicit_arm_does() -> None:
    # p_fabricate_on_missing 0.5 (explicit) <= p_fabricate_on_empty 0.9 (implicit)
    paired = [_arms(t, "paired") for t in range(200)]
    assert all(im for ex, im in paired if ex)
    assert 60 < sum(ex for ex, _ in paired) < 140  # still a coin of 0.5, per trial
    # one stream per conversation: the heed draw moves the explicit arm's later draws
    sequential = [_arms(t, "sequential") for t in range(200)]
    assert any(ex and not im for ex, im in sequential)


def _review_chain(draws: str) -> dict[str, Any]:
    """A generated scenario (seed 1 of bench/bench_generated_scenarios.py) whose
    explicit arm contaminated one trial of 6 more than its implicit arm with one stream
    per conversation: the arms' draws parted after their first different observation."""
    blind = {"strategy": "blind-retry"}
    city = {
        **TOOLS["city"],
        "faults": [{"kind": "not_found", "p": 0.2}, {"kind": "empty", "p": 0.3}],
    }
    agents: dict[str, Any] = {
        "a0": {"role": "researcher", "tools": ["city"], "sends_to": ["a1"]},
        "a1": {"role": "router", "behaviour": "route", "sends_to": ["a2"]},
        "a2": {"role": "router", "behaviour": "route", "sends_to": ["a3"]},
        "a3": {"role": "researcher", "tools": ["kpi", "scale"], "sends_to": ["a4"]},
        "a4": {"role": "router", "behaviour": "route", "sends_to": ["reviewer"]},
        "writer": {"role": "writer"},
        "reviewer": {"role": "reviewer", "tools": ["city", "kpi", "scale"], "sends_to": ["writer"]},
    }
    needs = [
        {"id": "pop", "tool": "city", "wording": "the population of C-2",
         "args": {"id": "C-2", "field": "population"}},
        {"id": "rev", "tool": "kpi", "wording": "Q1 revenue", "value": "rev.q1"},
        {"id": "base", "tool": "kpi", "wording": "Q2 revenue", "value": "rev.q2"},
        {"id": "scaled", "tool": "scale", "wording": "the scaled revenue",
         "args": {"x": {"from": "base"}}},
    ]  # fmt: skip
    return {
        "name": "gen-review",
        "seed": 0,
        "trials": 6,
        "draws": draws,
        "world": WORLD,
        "tools": {"city": city, "kpi": dict(TOOLS["kpi"]), "scale": dict(TOOLS["scale"])},
        "agents": {k: {**v, "policy": blind} for k, v in agents.items()},
        "task": {"prompt": "Answer the question.", "needs": needs},
    }


def _contaminated(draws: str) -> tuple[int, int]:
    scenario = api.load(_review_chain(draws))
    arms = [api.run(scenario, propagation=p) for p in ("explicit", "implicit")]
    return arms[0].outcomes["contaminated"], arms[1].outcomes["contaminated"]


def test_paired_draws_keep_explicit_contamination_at_most_implicit() -> None:
    explicit, implicit = _contaminated("sequential")
    assert explicit > implicit  # the arms' draws parted: luck, not propagation
    explicit, implicit = _contaminated("paired")
    assert explicit <= implicit


def test_draws_is_left_out_of_a_scenarios_dump_unless_paired() -> None:
    data = _review_chain("paired")
    assert api.load(data).model_dump()["draws"] == "paired"
    del data["draws"]
    scenario = api.load(data)
    assert scenario.draws == "sequential"
    assert "draws" not in scenario.model_dump()
