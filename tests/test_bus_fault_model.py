"""The `bus:` block: its shapes and names are checked like the rest of a scenario (file,
line, column, path, a suggestion), an empty block changes nothing (dumps and shas of
older scenarios stay as they were), and a block becomes the endpoints' plan."""

from __future__ import annotations

import pytest

from errorflow.faults.bus import BusFaultSpec, Partition
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import ScenarioError, load, load_text
from errorflow.scenario.overrides import apply, without_faults
from errorflow.scenario.spec import identity

BASE = """\
name: base
seed: 4
time_scale: 0.5
world:
  papers: [{id: p1, title: Attention, topic: attention}]
tools:
  search: {kind: paper_search}
agents:
  researcher: {role: researcher, tools: [search], sends_to: [writer]}
  writer: {role: writer}
task:
  prompt: Report on attention.
  needs: [{id: papers, tool: search, arg: query, wording: attention, value: attention}]
"""


def test_a_block_becomes_the_plan_every_endpoint_holds() -> None:
    s = load_text(
        BASE
        + """\
bus:
  drop: {p: 0.05}
  duplicate: {p: 0.02}
  delay: {p: 0.1, seconds: 3}
  reorder: {p: 0.01}
  partitions: [{between: [researcher, writer], from_s: 5, to_s: 30}]
  ack_timeout_s: 0.5
  max_resends: 2
"""
    )
    plan = s.bus.plan(s.seed, s.time_scale)
    assert plan is not None
    assert (plan.seed, plan.time_scale) == (4, 0.5)
    assert (plan.drop_p, plan.duplicate_p, plan.delay_p, plan.delay_s, plan.reorder_p) == (
        0.05,
        0.02,
        0.1,
        3.0,
        0.01,
    )
    assert plan.partitions == (Partition("researcher", "writer", 5.0, 30.0),)
    assert (plan.ack_timeout_s, plan.max_resends) == (0.5, 2)
    assert plan.kinds == ("partition", "drop", "duplicate", "delay", "reorder")


def test_no_block_no_plan_and_older_scenarios_dump_and_hash_as_before() -> None:
    s = load_text(BASE)
    assert s.bus.plan(s.seed, s.time_scale) is None and not s.bus.configured
    assert "bus" not in s.model_dump()
    for path in bundled().values():
        scenario = load(path)
        assert "bus" not in scenario.model_dump()
        with_block = apply(scenario, {"bus.drop.p": 0.1})
        assert identity.sha(with_block) != identity.sha(scenario)
        assert identity.sha(apply(with_block, {"bus": {}})) == identity.sha(scenario)


def test_the_fault_free_baseline_has_no_bus_faults() -> None:
    s = apply(load_text(BASE), {"bus": {"drop": {"p": 0.5}, "ack_timeout_s": 0.1}})
    assert s.bus.plan(s.seed, s.time_scale) is not None
    assert not without_faults(s).bus.drop


def test_only_the_resend_settings_make_a_plan_that_draws_nothing() -> None:
    plan = BusFaultSpec(ack_timeout_s=0.1).plan(seed=1, time_scale=0)
    assert plan is not None and plan.kinds == () and plan.ack_timeout_s == 0.1


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        (
            "partitions: [{between: [researcher, writr], from_s: 0, to_s: 5}]",
            "15:39: bus.partitions.0.between.1: unknown agent 'writr'; did you mean 'writer'?",
        ),
        (
            "partitions: [{between: [writer, writer], from_s: 0, to_s: 5}]",
            "15:16: bus.partitions.0: a partition is between two participants, found 'writer' "
            "twice",
        ),
        (
            "partitions: [{between: [researcher, writer], from_s: 9, to_s: 5}]",
            "15:16: bus.partitions.0: to_s (5) must be after from_s (9)",
        ),
        ("drop: {p: 1.5}", "15:10: bus.drop.p: expected a probability from 0 to 1, found 1.5"),
        ("dorp: {p: 0.1}", "15:3: bus.dorp: unknown key 'dorp'; did you mean 'drop'?"),
        ("delay: {p: 0.1}", "15:3: bus.delay.seconds: missing required field 'seconds'"),
        ("max_resends: -1", "15:3: bus.max_resends: expected a value from 0 to 20, found -1"),
    ],
)
def test_problems_are_reported_at_their_line_with_what_was_expected(
    block: str, problem: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        load_text(f"{BASE}bus:\n  {block}\n", "bad.yaml")
    assert str(info.value) == f"bad.yaml:{problem}"


def test_the_runner_may_be_one_end_of_a_partition() -> None:
    s = load_text(
        BASE + "bus:\n  partitions: [{between: [runner, researcher], from_s: 0, to_s: 1}]\n"
    )
    plan = s.bus.plan(s.seed, s.time_scale)
    assert plan is not None and plan.partitions[0].a == "runner"
