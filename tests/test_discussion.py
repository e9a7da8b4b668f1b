"""Discussion topologies (peers and rounds): routing, validation, and a debate in which
one faulty voice is outvoted by members that looked the facts up themselves."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from errorflow import api
from errorflow.agents.discussion import Discussion
from errorflow.models.backend import UpstreamTurn
from errorflow.models.deliberation import deliberate
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.scenario.loader import ScenarioError
from errorflow.scenario.run_plan import RunPlan

NEEDS = [
    {"id": "a", "tool": "q", "arg": "name", "wording": "a", "value": "m.a"},
    {"id": "b", "tool": "q", "arg": "name", "wording": "b", "value": "m.b"},
]


def _scenario(agents: dict[str, object], **extra: object) -> dict[str, object]:
    return {
        "name": "talk",
        "seed": 2,
        "trials": 40,
        "world": {"metrics": {"m.a": 10, "m.b": 20}},
        "tools": {"q": {"kind": "metric_store"}},
        "agents": agents,
        "task": {"prompt": "a and b", "needs": NEEDS},
        **extra,
    }


FLAT = {
    "x": {"role": "researcher", "tools": ["q"], "peers": ["y", "z"]},
    "y": {"role": "researcher", "tools": ["q"], "peers": ["z"]},
    "z": {"role": "researcher", "tools": ["q"]},
}


def test_rounds_go_to_every_peer_then_to_the_deciders() -> None:
    sc = api.load_scenario(_scenario(FLAT, discussion={"rounds": 2, "decides": ["z"]}))
    plan = RunPlan(sc)
    x, z = Discussion.of(plan.for_agent("x")), Discussion.of(plan.for_agent("z"))
    assert x.peers_after(0) == ["y", "z"] and x.peers_after(1) == ["z"]
    assert x.last_round == 1 and z.last_round == 2 and z.peers_after(2) is None
    assert sc.terminal_agents() == ["z"] and sc.entry_agents() == ["x", "y", "z"]


def test_a_discussion_run_ends_with_the_deciders_answer() -> None:
    sc = api.load_scenario(_scenario(FLAT, discussion={"rounds": 2, "decides": ["z"]}))
    res = api.run(sc)
    assert sum(res.outcomes.values()) == 40 and res.outcomes["bus_fault"] == 0
    finals = {
        m.sender for msgs in res.raw.messages.values() for m in msgs if m.recipient == "runner"
    }
    assert finals == {"z"}
    rounds = {m.payload.get("round") for msgs in res.raw.messages.values() for m in msgs}
    assert {1, 2} <= rounds


def test_one_corrupting_peer_is_outvoted_but_a_chain_passes_it_on() -> None:
    bad = [{"kind": "corrupt", "p": 1.0, "claims": 1.0}]
    flat = {**FLAT, "y": {**FLAT["y"], "faults": bad}}
    chain = {
        "x": {"role": "researcher", "tools": ["q"], "sends_to": ["y"]},
        "y": {"role": "writer", "sends_to": ["z"], "faults": bad},
        "z": {"role": "writer"},
    }
    talk = api.run(api.load_scenario(_scenario(flat, discussion={"rounds": 2, "decides": ["z"]})))
    line = api.run(api.load_scenario(_scenario(chain)))
    assert line.outcomes["contaminated"] == 40
    assert talk.outcomes["contaminated"] < 10


@pytest.mark.parametrize(
    ("agents", "extra", "message"),
    [
        ({"x": {"role": "researcher", "tools": ["q"], "peers": ["x"]}}, {}, "itself as a peer"),
        ({"x": {"role": "researcher", "tools": ["q"], "peers": ["w"]}}, {}, "unknown agent 'w'"),
        (
            {**FLAT, "x": {**FLAT["x"], "sends_to": ["w2"]}, "w2": {"role": "writer"}},
            {"discussion": {"rounds": 1, "decides": ["z"]}},
            "does not decide",
        ),
    ],
)
def test_bad_discussions_are_refused(
    agents: dict[str, object], extra: dict[str, object], message: str
) -> None:
    with pytest.raises(ScenarioError, match=message):
        api.load_scenario(_scenario(agents, **extra))


def _turn(sender: str, value: int) -> UpstreamTurn:
    return UpstreamTurn(sender, "ok", 1.0, [], FinalAnswer(claims=[Claim("a", value)]))


def test_deliberation_keeps_own_evidence_or_goes_with_the_majority() -> None:
    mine = FinalAnswer(claims=[Claim("a", 1)])
    kept = sum(
        deliberate(mine, {"a": 1}, [_turn("p", 2), _turn("q", 2)], random.Random(i), 0.7)
        .claims[0]
        .value
        == 1
        for i in range(2000)
    )
    assert 1300 < kept < 1500  # 0.7 of 2000, else the majority (2) wins
    told = deliberate(mine, {}, [_turn("p", 2), _turn("q", 2)], random.Random(0), 1.0)
    assert told.claims[0].value == 2  # not its own evidence: the majority
    agreed = deliberate(mine, {}, [_turn("p", 1)], random.Random(0), 0.0)
    assert agreed.claims[0].value == 1


def test_the_tui_knows_a_discussion_goes_both_ways() -> None:
    from errorflow.tui.state import RunModel

    sc = api.load_scenario(_scenario(FLAT, discussion={"rounds": 1}))
    model = RunModel("r", sc)
    assert {("x", "y"), ("y", "x"), ("x", "z"), ("z", "x"), ("y", "z"), ("z", "y")} <= set(
        model.edges
    )


def test_a_round_that_goes_to_no_peer_is_still_counted(tmp_path: Path) -> None:
    """x alone decides, so its round-0 answer goes to nobody: what it spent and counted
    there comes with its final result (the costs match the events stored)."""
    faults = {"faults": [{"kind": "transient", "p": 0.5}]}
    tools = {"q": {"kind": "metric_store", **faults}}
    sc = api.load_scenario(
        _scenario(FLAT, discussion={"rounds": 1, "decides": ["x"]}, tools=tools, trials=10)
    )
    db = tmp_path / "d.db"
    res = api.run(sc, db=db)
    per_trial = res.raw.summary["metrics"]["per_trial"]
    conn = sqlite3.connect(db)
    events = Counter(dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type")))
    assert per_trial["model_calls"] * 10 == events["model_call"]
    assert per_trial["retries"] * 10 == events["retry"] > 0
    fired = res.raw.summary["tool_faults"]["tools.q.faults[0]"]
    assert fired["times"] == events["retry"] + events["retries_exhausted"]
    policy = res.raw.summary["metrics"]["policy"]
    assert sum(p.get("retries", 0) for p in policy.values()) == events["retry"]
