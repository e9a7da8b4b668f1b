"""Ground truth with dependencies followed (errorflow.world.ground_truth)."""

from __future__ import annotations

from pathlib import Path

from errorflow.scenario.loader import load_text
from errorflow.scoring.score import Truth
from errorflow.world.ground_truth import need_order, need_truths

TEXT = """\
name: gt
world:
  tables:
    tickets:
      rows:
        - {id: T-1, product: router, priority: high}
    kb:
      rows:
        - {id: KB-1, product: router}
        - {id: KB-2, product: switch}
        - {id: KB-3, product: router}
tools:
  ticket: {kind: lookup, table: tickets, args: {id: {}}}
  kb: {kind: search, table: kb, args: {product: {}}}
  fx: {kind: python, function: "TOOLS:rate"}
agents:
  a: {role: researcher, tools: [ticket, kb, fx]}
task:
  prompt: p
  needs:
    - {id: articles, tool: kb, wording: kb, args: {product: {from: ticket, field: product}}}
    - {id: ticket, tool: ticket, wording: the ticket, args: {id: T-1}}
    - {id: rate, tool: fx, wording: rate, args: {currency: EUR}}
    - {id: stated, tool: fx, wording: rate, args: {currency: EUR}, expect: 2}
"""


def scenario(tmp_path: Path) -> str:
    tools = tmp_path / "tools.py"
    tools.write_text("def rate(currency: str) -> float:\n    return {'EUR': 1.1}[currency]\n")
    return TEXT.replace("TOOLS", str(tools))


def test_dependencies_come_first_and_take_the_correct_upstream_value(tmp_path: Path) -> None:
    s = load_text(scenario(tmp_path))
    assert [n.id for n in need_order(s.task.needs)] == ["ticket", "articles", "rate", "stated"]
    truths = need_truths(s)
    assert truths["ticket"] == {"id": "T-1", "product": "router", "priority": "high"}
    assert truths["articles"] == ["KB-1", "KB-3"]  # the router's, from the true product
    assert truths["rate"] == 1.1  # the Python tool's own fault-free answer
    assert truths["stated"] == 2  # `expect` wins


def test_the_scorer_uses_them(tmp_path: Path) -> None:
    truth = Truth(load_text(scenario(tmp_path)))
    assert truth.is_true("articles", ["KB-3", "KB-1"])
    assert not truth.is_true("articles", ["KB-2"])
    assert truth.is_true("rate", 1.1)


def test_a_dependency_with_no_answer_gives_no_answer_downstream(tmp_path: Path) -> None:
    text = scenario(tmp_path).replace(
        "args: {id: T-1}}", "args: {id: T-1}, expect: {product: none}}"
    )
    assert need_truths(load_text(text))["articles"] == []
