"""The tool world as one agent reaches it (errorflow.world.tool_world): a client per trial
over one catalog and the run's services, the ground truth, the withheld identifiers."""

from __future__ import annotations

from errorflow import api
from errorflow.world.ground_truth import need_truths
from errorflow.world.services import ServiceRegistry
from errorflow.world.tool_client import hidden_identifier
from errorflow.world.tool_world import ToolWorld
from tests.conftest import scenario

BAD_ARGS = {
    "name": "hidden",
    "seed": 3,
    "trials": 40,
    "world": {"metrics": {"m.a": 1}},
    "tools": {"q": {"kind": "metric_store", "faults": [{"kind": "bad_args", "p": 0.5}]}},
    "agents": {"r": {"role": "researcher", "tools": ["q"]}},
    "task": {"prompt": "a", "needs": [{"id": "a", "tool": "q", "wording": "a", "value": "m.a"}]},
}


def test_a_client_per_trial_over_one_catalog_and_the_runs_services() -> None:
    s = scenario("outage")
    shared = ServiceRegistry(s)
    world = ToolWorld(s, shared)
    one, two = world.client(1, "writer"), world.client(2, "writer@r1")
    assert (one.trial, one.agent, two.trial, two.agent) == (1, "writer", 2, "writer@r1")
    assert one.catalog is world.catalog is two.catalog and one.services is shared
    assert ToolWorld(s).services is not shared  # its own, when none is given


def test_the_truths_are_the_worlds() -> None:
    s = scenario("contamination")
    assert ToolWorld(s).truths() == need_truths(s)


async def test_truths_given_are_kept_and_others_worked_out_in_a_thread() -> None:
    s = scenario("contamination")
    given = {"papers": ["worked out by the runner"]}
    world = ToolWorld(s, truths=given)
    await world.work_out_truths()
    assert world.truths() == given
    world = ToolWorld(s)
    await world.work_out_truths()
    assert world._truths == need_truths(s)


def test_a_withheld_identifier_is_drawn_per_trial_from_the_seed() -> None:
    s = api.load_scenario(BAD_ARGS)
    world, need = ToolWorld(s), s.task.needs[0]
    hidden = [world.hidden(t, need) for t in range(40)]
    assert hidden == [hidden_identifier(s, t, need) for t in range(40)]
    assert any(hidden) and not all(hidden)
