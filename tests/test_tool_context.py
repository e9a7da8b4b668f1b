"""A Python tool's own randomness, reproducible through its ToolContext
(errorflow.core.tool_context): seeded from the scenario's seed, the trial, the agent,
the tool and the call; no argument the model sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from errorflow import ToolContext, api
from errorflow.scenario.problems import ScenarioError
from errorflow.scenario.python_ref import load_callable, signature_args_model
from errorflow.world.python_tool import PythonTool

TOOLS = Path(__file__).resolve().parent / "own_systems" / "ctx_tools.py"

SHOP: dict[str, Any] = {
    "name": "shop",
    "seed": 4,
    "trials": 60,
    "tools": {"price": {"kind": "python", "function": f"{TOOLS}:flaky_price"}},
    "agents": {
        "clerk": {
            "role": "researcher",
            "tools": ["price"],
            "sends_to": ["writer"],
            "policy": {"strategy": "tell-model"},  # the model sees each failure
        },
        "writer": {"role": "writer"},
    },
    "task": {
        "prompt": "What does SKU-1 cost?",
        "needs": [
            {"id": "price", "tool": "price", "wording": "the price", "args": {"sku": "SKU-1"}}
        ],
    },
}


def test_the_context_is_no_argument_of_the_tool() -> None:
    for name in ("flaky_price", "sampled"):
        fn = load_callable(f"{TOOLS}:{name}")
        model = signature_args_model(fn, name)
        assert "ctx" not in model.model_fields and len(model.model_fields) == 1


async def test_the_same_call_of_the_same_trial_draws_the_same() -> None:
    tool = PythonTool(load_callable(f"{TOOLS}:sampled"), name="sampled")
    one = await tool.call({"n": 5}, 5.0, ToolContext.of(7, 3, "a", "sampled", 0))
    again = await tool.call({"n": 5}, 5.0, ToolContext.of(7, 3, "a", "sampled", 0))
    other_call = await tool.call({"n": 5}, 5.0, ToolContext.of(7, 3, "a", "sampled", 1))
    other_trial = await tool.call({"n": 5}, 5.0, ToolContext.of(7, 4, "a", "sampled", 0))
    assert one == again and one != other_call and one != other_trial


def _failures(result: api.Result) -> list[tuple[int, str]]:
    return sorted((r["trial"], str(r["outcome"])) for r in result.records())


def test_a_flaky_tool_is_reproducible_and_fails_at_its_own_rate() -> None:
    scenario = api.load(SHOP)
    first = api.run(scenario, propagation="explicit")
    second = api.run(scenario, propagation="explicit")
    assert _failures(first) == _failures(second)  # same seed, same draws, same outcomes
    failed = first.outcomes["contained"] + first.outcomes["contaminated"]
    assert 8 <= failed <= 30, first.outcomes  # ~30 % of 60 first calls fail (tell-model)
    reseeded = api.run(api.override(scenario, {"seed": 5}), propagation="explicit")
    assert _failures(reseeded) != _failures(first)
    assert api.load(SHOP).trials == 60 and first.outcomes["success"] > 0


def test_a_tool_that_never_answers_the_truth_call_asks_for_expect() -> None:
    """A tool whose every truth call fails has no answer to score against."""
    spec = {**SHOP, "tools": {"price": {"kind": "python", "function": f"{TOOLS}:broken"}}}
    with pytest.raises(ScenarioError) as info:
        api.run(api.load(spec), propagation="explicit")
    assert "ground truth of need 'price' could not be computed" in str(info.value)
    assert "RuntimeError: backend misconfigured" in str(info.value)
    assert "in 5 call(s)" in str(info.value) and "expect:" in str(info.value)
    stated = {**spec, "task": {**spec["task"], "needs": [
        {**spec["task"]["needs"][0], "expect": 99.0}]}}  # fmt: skip
    assert api.run(api.load(stated), propagation="explicit").outcomes["success"] == 0
