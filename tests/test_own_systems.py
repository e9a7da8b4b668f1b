"""Systems a new user describes from the README and FORMAT.md alone, and the labels they
must get: fault-free, a system that makes no mistakes succeeds; a checking agent reaches
the same tool answers as the agent it checks (errorflow.models.simulated, the scenario's
modelling warnings in errorflow.scenario.checks.references)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from errorflow import api
from errorflow.core.tool_errors import SchemaViolation
from errorflow.scenario.checks.references import modelling_warnings
from errorflow.scoring.score import RECOVERED, Truth
from errorflow.world.tool_client import ToolClient

TOOLS = Path(__file__).resolve().parent / "own_systems" / "codetools.py"

#: planner -> coder -> tester -> reviewer, Python tools, a need that depends on another.
CODE_CHAIN: dict[str, Any] = {
    "name": "code-chain",
    "seed": 1,
    "trials": 40,
    "tools": {
        "find_module": {"kind": "python", "function": f"{TOOLS}:find_module"},
        "run_tests": {"kind": "python", "function": f"{TOOLS}:run_tests"},
    },
    "agents": {
        "planner": {"role": "planner", "behaviour": "route", "sends_to": ["coder"]},
        "coder": {
            "role": "coder",
            "behaviour": "gather",
            "tools": ["find_module"],
            "sends_to": ["tester"],
        },
        "tester": {
            "role": "tester",
            "behaviour": "gather",
            "tools": ["run_tests"],
            "sends_to": ["reviewer"],
        },
        "reviewer": {"role": "reviewer", "tools": ["find_module", "run_tests"]},
    },
    "task": {
        "prompt": "Fix the login bug and make sure the tests pass.",
        "needs": [
            {
                "id": "module",
                "tool": "find_module",
                "arg": "feature",
                "wording": "the module of the login feature",
                "args": {"feature": "login"},
            },
            {
                "id": "tests",
                "tool": "run_tests",
                "wording": "the test results of the affected module",
                "args": {"module": {"from": "module", "field": "module"}},
            },
        ],
    },
}

#: No mistakes of the model's own: what is left to go wrong is the system's modelling.
FLAWLESS = {"p_drop_required_arg": 0.0, "p_call_unknown_tool": 0.0}


def _load(spec: dict[str, Any]) -> api.Scenario:
    scenario = api.load(spec)
    return api.override(
        scenario,
        {f"agents.{a}.model.params": FLAWLESS for a in scenario.agents},
    )


def test_a_checking_agent_resolves_a_dependent_needs_argument() -> None:
    """The reviewer re-runs the tests for the module it found, not for the need's
    wording: fault-free, every trial succeeds."""
    result = api.run(_load(CODE_CHAIN), propagation="explicit")
    assert result.outcomes["success"] == 40, result.outcomes


def test_a_checker_without_a_tool_for_a_claim_it_receives_is_warned_about() -> None:
    spec = {**CODE_CHAIN, "agents": dict(CODE_CHAIN["agents"])}
    spec["agents"]["reviewer"] = {"role": "reviewer", "tools": ["find_module"]}
    warnings = modelling_warnings(api.load(spec))
    assert [(loc, "no tool for need(s) tests" in msg) for loc, msg in warnings] == [
        (("agents", "reviewer", "tools"), True)
    ]


def test_an_inspectors_tools_count_as_held() -> None:
    spec = {**CODE_CHAIN, "agents": dict(CODE_CHAIN["agents"])}
    spec["tools"] = {
        **CODE_CHAIN["tools"],
        "lint": {"kind": "python", "function": f"{TOOLS}:run_tests"},
    }
    spec["agents"]["reviewer"] = {
        "role": "writer",
        "inspector": {"tools": ["find_module", "run_tests", "lint"]},
    }
    warnings = modelling_warnings(api.load(spec))
    assert [loc for loc, _ in warnings] == [("agents", "reviewer", "inspector", "tools", 2)]
    assert "inspector never calls 'lint'" in warnings[0][1]


@pytest.mark.parametrize(
    ("args", "raw"),
    [
        ({}, "TypeError: run_tests() missing 1 required positional argument: 'module'"),
        (
            {"module": "a.b", "verbose": True},
            "TypeError: run_tests() got an unexpected keyword argument 'verbose'",
        ),
    ],
)
def test_a_python_tools_argument_errors_are_worded_as_python_words_them(
    args: dict[str, object], raw: str
) -> None:
    client = ToolClient(api.load(CODE_CHAIN), trial=0, agent="tester")
    with pytest.raises(SchemaViolation) as info:
        client.validate("run_tests", args)
    assert str(info.value) == raw


#: A metric behind a flaky tool, and a writer whose inspector re-fetches every claim.
INSPECTED: dict[str, Any] = {
    "name": "inspected",
    "seed": 5,
    "trials": 60,
    "world": {"metrics": {"rev.q3": 1650, "cost.q3": 900}},
    "tools": {"kpi": {"kind": "metric_store", "faults": [{"kind": "transient", "p": 0.3}]}},
    "agents": {
        "analyst": {
            "role": "researcher",
            "tools": ["kpi"],
            "sends_to": ["writer"],
            "policy": {"strategy": "tell-model"},
        },
        "writer": {"role": "writer", "inspector": {"tools": ["kpi"]}},
    },
    "task": {
        "prompt": "How was Q3?",
        "needs": [
            {"id": "revenue", "tool": "kpi", "wording": "Q3 revenue", "value": "rev.q3"},
            {"id": "cost", "tool": "kpi", "wording": "Q3 cost", "value": "cost.q3"},
        ],
    },
}


def test_a_whole_and_true_answer_is_never_contaminated() -> None:
    """The analyst swallows its failures (implicit); the writer's inspector re-fetches
    both figures: a final answer whose every claim is true and complete is a repair,
    not a dropped failure."""
    result = api.run(api.load(INSPECTED), propagation="implicit")
    scenario = api.load(INSPECTED)
    truth = Truth(scenario)
    recovered = 0
    for score in result.raw.scores:
        finals = [lb for lb in score.labels if lb.sender == "writer"]
        assert finals
        recovered += sum(lb.reason == RECOVERED for lb in finals)
        if score.outcome == "contaminated":
            assert "dropped silently" not in score.reason, score
    assert recovered > 0 and truth.values == {"revenue": 1650, "cost": 900}


ROLLUP_TOOLS = TOOLS.parent / "rolluptools.py"

#: A week's revenue summed over a batch of daily figures: a need on a batch's whole answer.
ROLLUP: dict[str, Any] = {
    "name": "rollup",
    "seed": 2,
    "trials": 40,
    "world": {
        "tables": {
            "sales": {
                "key": "day",
                "rows": [
                    {"day": "mon", "revenue": 100},
                    {"day": "tue", "revenue": 250},
                    {"day": "wed", "revenue": 75},
                ],
            }
        }
    },
    "tools": {
        "daily_revenue": {
            "kind": "lookup",
            "table": "sales",
            "args": {"days": {"type": "array", "items": "string"}},
            "key": {"days": "day"},
            "returns": ["revenue"],
        },
        "sum_up": {"kind": "python", "function": f"{ROLLUP_TOOLS}:total"},
    },
    "agents": {
        "fetcher": {"role": "researcher", "tools": ["daily_revenue"], "sends_to": ["accountant"]},
        "accountant": {"role": "researcher", "tools": ["sum_up"], "sends_to": ["writer"]},
        "writer": {"role": "writer"},
    },
    "task": {
        "prompt": "What was the revenue this week?",
        "needs": [
            {
                "id": "daily",
                "tool": "daily_revenue",
                "wording": "the daily revenue",
                "args": {"days": ["mon", "tue", "wed"]},
            },
            {
                "id": "week",
                "tool": "sum_up",
                "wording": "the week's total",
                "args": {"daily": {"from": "daily"}},
            },
        ],
    },
}


def test_a_need_on_a_batch_needs_whole_answer_takes_its_items() -> None:
    result = api.run(_load(ROLLUP), propagation="explicit")
    assert result.outcomes["success"] == 40, result.outcomes
    assert Truth(api.load(ROLLUP)).values["week"] == 425.0


def test_over_a_partial_batch_explicit_contaminates_fewer_trials() -> None:
    """Items of the batch fail: the accountant told of the gap leaves the total open."""
    faulty = api.override(
        api.load(ROLLUP),
        {"tools.daily_revenue.faults": [{"kind": "partial", "p": 0.5, "item_p": 0.4}]},
    )
    explicit = api.run(faulty, propagation="explicit").outcomes
    implicit = api.run(faulty, propagation="implicit").outcomes
    assert implicit["contaminated"] >= 8
    assert explicit["contaminated"] <= implicit["contaminated"] // 2, (explicit, implicit)


#: Derived needs: a sum over a batch need's rows, then converted by another need (a rate
#: fetched by another agent); the accountant holds only the computing tools.
DERIVED: dict[str, Any] = {
    "name": "derived-needs",
    "seed": 4,
    "trials": 40,
    "world": {
        "metrics": {"fx.eurusd": 1.1},
        "tables": {"sales": {"key": "day", "rows": ROLLUP["world"]["tables"]["sales"]["rows"]}},
    },
    "tools": {
        "daily_revenue": ROLLUP["tools"]["daily_revenue"],
        "fx": {"kind": "metric_store"},
        "sum_up": {"kind": "python", "function": "errorflow.examples.accounting:total"},
        "to_usd": {"kind": "python", "function": "errorflow.examples.accounting:convert"},
    },
    "agents": {
        "fetcher": {"role": "researcher", "tools": ["daily_revenue"], "sends_to": ["accountant"]},
        "rates": {"role": "researcher", "tools": ["fx"], "sends_to": ["accountant"]},
        "accountant": {"role": "researcher", "tools": ["sum_up", "to_usd"], "sends_to": ["writer"]},
        "writer": {"role": "writer"},
    },
    "task": {
        "prompt": "What was this week's revenue in USD?",
        "needs": [
            {"id": "daily", "tool": "daily_revenue", "wording": "the daily revenue",
             "args": {"days": ["mon", "tue", "wed"]}},
            {"id": "rate", "tool": "fx", "wording": "the EUR/USD rate", "value": "fx.eurusd"},
            {"id": "week", "tool": "sum_up", "wording": "the week's total",
             "args": {"daily": {"from": "daily"}}},
            {"id": "week_usd", "tool": "to_usd", "wording": "the week's total in USD",
             "args": {"amount": {"from": "week"}, "rate": {"from": "rate"}}},
        ],
    },
}  # fmt: skip


def test_derived_needs_are_computed_from_the_answers_they_depend_on() -> None:
    """A need computed from two others (one itself a sum over a batch) by a tool the
    fetching agents do not hold: fault-free every trial succeeds, and the ground truth
    follows the same computation."""
    truth = Truth(api.load(DERIVED))
    assert truth.values["week"] == 425.0 and truth.values["week_usd"] == 467.5
    result = api.run(_load(DERIVED), propagation="explicit")
    assert result.outcomes["success"] == 40, result.outcomes


def test_a_silent_wrong_input_makes_the_derived_answer_false() -> None:
    """A stale rate succeeds with a wrong answer: the derived total computed from it is
    a false claim, which explicit propagation cannot see either."""
    faulty = api.override(_load(DERIVED), {"tools.fx.faults": [{"kind": "stale", "p": 0.5}]})
    for propagation in ("explicit", "implicit"):
        result = api.run(faulty, propagation=propagation)
        reasons = [s.reason for s in result.raw.scores if s.outcome.value == "contaminated"]
        assert len(reasons) >= 10, (propagation, result.outcomes)
        assert all("week_usd" in r for r in reasons), reasons


#: Two more systems a new user wrote from FORMAT.md alone, run as written (the default
#: simulated model, its own slips included): nested managers with a writer after them,
#: and the user's own Python tools with a dependent need, a stale cache checked against a
#: second source and a reviewer.
UNSEEN = [TOOLS.parent / "incident_desk.yaml", TOOLS.parent / "ship_quote.yaml"]


@pytest.mark.parametrize("path", UNSEEN, ids=lambda p: p.stem)
def test_a_new_users_own_system_gets_true_labels(path: Path) -> None:
    """Fault-free at least 90 % succeed; with the faults explicit contaminates fewer
    trials than implicit; no final answer whose every fact is right is contaminated."""
    scenario = api.load(path)
    clean = api.baseline(scenario)
    assert clean.outcomes["success"] >= 0.9 * scenario.trials, clean.outcomes
    both = api.run(scenario, propagation="both")
    explicit, implicit = both.explicit.outcomes, both.implicit.outcomes
    assert explicit["contaminated"] < implicit["contaminated"], (explicit, implicit)
    for result in (clean, both.explicit, both.implicit):
        for score in result.raw.scores:
            if score.outcome == "contaminated":
                assert "wrong" in score.credit.values(), (path.stem, score.trial, score.credit)
