"""A manager's delegates (`agents.NAME.delegates`): the topology they make, the sub-task
each gets, and the mistakes the loader refuses at the path that causes them
(errorflow.scenario.checks.delegation_checks)."""

from __future__ import annotations

import pytest

from errorflow.scenario.checks.references import modelling_warnings
from errorflow.scenario.loader import ScenarioError, load_text

TEAM = """\
name: team
world:
  metrics: {rev.q3: 100, cost.q3: 60, fx.eur: 1.1}
tools:
  kpi: {kind: metric_store}
  rates: {kind: metric_store}
agents:
  lead: {role: manager, behaviour: synthesise, delegates: [sales, backup, fx]}
  sales: {role: researcher, tools: [kpi]}
  backup: {role: researcher, tools: [kpi, rates]}
  fx: {role: researcher, tools: [rates]}
task:
  prompt: p
  needs:
    - {id: revenue, tool: kpi, wording: Q3 revenue, value: rev.q3}
    - {id: cost, tool: kpi, wording: Q3 cost, value: cost.q3}
    - {id: eur, tool: rates, wording: the EUR rate, value: fx.eur}
"""


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        load_text(text, "s.yaml")
    return [(p.path, p.message) for p in info.value.problems]


def test_a_manager_and_its_delegates_make_a_fan_out_and_fan_in_without_a_cycle() -> None:
    s = load_text(TEAM)
    assert s.entry_agents() == ["lead"] and s.terminal_agents() == ["lead"]
    assert s.upstream_of("sales") == ["lead"] and s.downstream_of("sales") == ["lead"]
    assert s.result_targets("sales") == ["lead"] and s.result_targets("lead") == ["runner"]
    assert s.manager_of("fx") == "lead" and s.manager_of("lead") is None
    assert modelling_warnings(s) == []


def test_each_need_goes_to_the_first_delegate_that_fetches_it() -> None:
    s = load_text(TEAM)
    assert s.assigned_needs("sales") == ["revenue", "cost"]
    assert s.assigned_needs("backup") == ["eur"]  # before fx in `delegates`
    assert s.assigned_needs("fx") == []
    assert s.assigned_needs("lead") is None


def test_a_value_from_the_managers_upstream_reaches_its_delegates_but_not_a_sibling() -> None:
    text = TEAM.replace(
        "  lead: {role: manager, behaviour: synthesise, delegates: [sales, backup, fx]}",
        "  intake: {role: researcher, tools: [rates], sends_to: [lead]}\n"
        "  lead: {role: manager, behaviour: synthesise, delegates: [sales, backup, fx]}",
    )
    s = load_text(text)
    assert s.reaches("intake", "sales")  # passed on with the sub-task
    assert not s.reaches("sales", "fx")  # a sibling's result comes after fx worked
    assert s.reaches("sales", "lead") and not s.reaches("lead", "sales")


def test_a_dependency_between_two_delegates_is_refused() -> None:
    text = TEAM.replace(
        "    - {id: eur, tool: rates, wording: the EUR rate, value: fx.eur}",
        "    - {id: eur, tool: rates, wording: the EUR rate, args: {name: {from: revenue}}}",
    ).replace("backup: {role: researcher, tools: [kpi, rates]}", "backup: {role: researcher}")
    found = problems(text)
    assert any(
        path == "task.needs.2.args.name.from"
        and "never reach 'fx'" in msg
        and "side by side" in msg
        for path, msg in found
    ), found


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (("delegates: [sales, backup, fx]", "delegates: [sales, backup, fxx]"),
         "agents.lead.delegates.2", "unknown agent 'fxx'; did you mean 'fx'?"),
        (("delegates: [sales, backup, fx]", "delegates: [sales, lead, fx]"),
         "agents.lead.delegates.1", "delegates to itself"),
        (("delegates: [sales, backup, fx]", "delegates: [sales, sales, fx]"),
         "agents.lead.delegates.1", "named twice"),
        (("fx: {role: researcher, tools: [rates]}",
          "fx: {role: researcher, tools: [rates], sends_to: [sales]}"),
         "agents.fx.sends_to", "its result goes back to 'lead'; remove its sends_to"),
        (("fx: {role: researcher, tools: [rates]}",
          "fx: {role: researcher, tools: [rates], waits_for: [sales]}"),
         "agents.fx.waits_for", "which gives it its task; remove its waits_for"),
        (("backup: {role: researcher, tools: [kpi, rates]}",
          "backup: {role: researcher, tools: [kpi, rates], sends_to: [fx]}"),
         "agents.lead.delegates.2", "also receives from backup"),
        (("backup: {role: researcher, tools: [kpi, rates]}",
          "backup: {role: researcher, tools: [kpi, rates], waits_for: [fx]}"),
         "agents.lead.delegates.2", "backup waits for 'fx', a delegate of 'lead'"),
        (("fx: {role: researcher, tools: [rates]}",
          "fx: {role: researcher, tools: [rates], delegates: [backup]}"),
         "agents.fx.delegates.0", "already a delegate of 'lead'"),
        (("fx: {role: researcher, tools: [rates]}",
          "fx: {role: researcher, tools: [rates], peers: [backup]}"),
         "agents.fx.peers", "a delegate does not discuss"),
        (("lead: {role: manager, behaviour: synthesise,",
          "lead: {role: manager, behaviour: synthesise, peers: [other],"),
         "agents.lead.delegates", "delegates and discusses with peers"),
    ],
)  # fmt: skip
def test_delegation_mistakes_are_refused_at_their_path(
    change: tuple[str, str], path: str, words: str
) -> None:
    text = TEAM.replace(*change)
    if "peers: [other]" in text:
        text = text.replace("agents:\n", "agents:\n  other: {role: researcher, tools: [kpi]}\n")
    found = problems(text)
    assert any(p == path and words in msg for p, msg in found), found


def test_delegates_are_left_out_of_the_dump_of_an_agent_without_them() -> None:
    dumped = load_text(TEAM).model_dump()["agents"]
    assert dumped["lead"]["delegates"] == ["sales", "backup", "fx"]
    assert "delegates" not in dumped["sales"]
