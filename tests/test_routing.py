"""Where results go, run end to end: a manager sends its delegates their sub-tasks,
waits for their results and composes its own answer from them (errorflow.agents.routing,
errorflow.agents.trial_work's DispatchRound, errorflow.agents.inputs)."""

from __future__ import annotations

from typing import Any

from errorflow import api
from errorflow.protocol.envelope import Kind
from errorflow.protocol.result import ResultPayload

#: A manager that heeds every upstream failure (explicit) and invents what comes back
#: empty (implicit): what each arm does with a worker's failure is then certain.
DECIDED = {"p_heed_upstream": 1.0, "p_fabricate_on_empty": 1.0, "p_fabricate_on_missing": 1.0}
FLAWLESS = {"p_drop_required_arg": 0.0, "p_call_unknown_tool": 0.0}


def team(
    *, kpi_faults: list[dict[str, Any]] | None = None, fx_faults: list[Any] | None = None
) -> dict[str, Any]:
    worker = {"role": "researcher", "model": {"params": FLAWLESS}}
    return {
        "name": "team",
        "seed": 5,
        "trials": 12,
        "world": {
            "metrics": {"rev.q3": 100, "cost.q3": 60, "fx.eur": 1.1},
            "tables": {"cities": {"key": "id", "rows": [{"id": "C-2", "population": 54000}]}},
        },
        "tools": {
            "kpi": {"kind": "metric_store", "faults": kpi_faults or []},
            "rates": {"kind": "metric_store"},
            "city": {
                "kind": "lookup",
                "table": "cities",
                "args": {"id": {"type": "string"}, "field": {"type": "string"}},
                "select": "field",
            },
        },
        "agents": {
            "lead": {
                "role": "manager",
                "behaviour": "synthesise",
                "delegates": ["sales", "cities", "fx"],
                "wait_s": 30,
                "model": {"params": {**FLAWLESS, **DECIDED}},
            },
            "sales": {**worker, "tools": ["kpi"]},
            "cities": {**worker, "tools": ["city", "kpi"]},  # kpi's needs go to sales
            "fx": {**worker, "tools": ["rates"], "faults": fx_faults or []},
        },
        "task": {
            "prompt": "Brief the board on Q3.",
            "needs": [
                {"id": "revenue", "tool": "kpi", "wording": "Q3 revenue", "value": "rev.q3"},
                {"id": "population", "tool": "city", "wording": "beta's population",
                 "args": {"id": "C-2", "field": "population"}},
                {"id": "eur", "tool": "rates", "wording": "the EUR rate", "value": "fx.eur"},
            ],
        },
    }  # fmt: skip


def claims_of(env: Any) -> dict[str, Any]:
    return {c.key: c.value for c in ResultPayload.from_wire(env.payload).answer.claims}


def test_fault_free_every_trial_succeeds_through_the_manager() -> None:
    result = api.run(api.load(team()), propagation="explicit")
    assert result.outcomes["success"] == 12
    for messages in result.raw.messages.values():
        tasks = sorted(
            (m.recipient, m.payload["round"])
            for m in messages
            if m.kind is Kind.TASK and m.sender == "lead"
        )
        assert tasks == [("cities", 0), ("fx", 0), ("sales", 0)]
        back = {m.sender: m for m in messages if m.recipient == "lead" and m.kind is Kind.RESULT}
        assert sorted(back) == ["cities", "fx", "sales"]
        assert all(m.payload["round"] == 1 for m in back.values())
        # each worker answers for its sub-task only (cities holds kpi but was not given it)
        assert set(claims_of(back["cities"])) == {"population"}
        assert set(claims_of(back["sales"])) == {"revenue"}
        (final,) = [m for m in messages if m.recipient == "runner"]
        assert final.sender == "lead" and final.payload["round"] == 1
        assert {m.id for m in back.values()} <= set(final.derived_from)


def test_a_workers_tool_fault_is_contained_explicitly_and_contaminates_implicitly() -> None:
    scenario = api.load(team(kpi_faults=[{"kind": "not_found", "p": 1.0}]))
    both = api.run(scenario, propagation="both")
    explicit, implicit = both.explicit, both.implicit
    assert explicit.outcomes["contained"] == 12 and explicit.outcomes["contaminated"] == 0
    assert implicit.outcomes["contaminated"] == 12
    for messages in explicit.raw.messages.values():
        (final,) = [m for m in messages if m.recipient == "runner"]
        assert final.status.value != "ok"
        assert any(e.origin == "sales" and e.code == "not_found" for e in final.errors)
    for messages in implicit.raw.messages.values():
        (final,) = [m for m in messages if m.recipient == "runner"]
        assert final.status.value == "ok" and not final.errors
        assert claims_of(final)["revenue"] not in (None, 100)  # invented by the manager


def test_a_worker_that_never_answers_is_a_timed_out_wait_of_the_manager() -> None:
    scenario = api.load(team(fx_faults=[{"kind": "hang", "p": 1.0}]))
    both = api.run(scenario, propagation="both")
    assert both.explicit.outcomes["contained"] == 12
    assert both.implicit.outcomes["contaminated"] == 12
    for messages in both.explicit.raw.messages.values():
        (final,) = [m for m in messages if m.recipient == "runner"]
        # the manager's own failure: it waited `wait_s` for fx and went on without it
        (timeout,) = final.errors
        assert timeout.origin == "lead" and timeout.code == "timeout"
        assert timeout.message == "fx: timeout"
        # the other workers' answers still make it into the manager's answer
        assert claims_of(final)["population"] == 54000
        assert claims_of(final)["revenue"] == 100


def test_the_bundled_example_contains_in_explicit_what_contaminates_in_implicit() -> None:
    both = api.run(api.load("manager-workers"), propagation="both", trials=40)
    assert both.explicit.outcomes["contaminated"] == 0
    assert both.implicit.outcomes["contaminated"] >= 10


def test_a_delegate_may_manage_delegates_of_its_own() -> None:
    data = team()
    agents = data["agents"]
    agents["lead"]["delegates"] = ["sales", "desk"]
    agents["desk"] = {"role": "desk", "behaviour": "route", "delegates": ["cities", "fx"]}
    scenario = api.load(data)
    assert scenario.assigned_needs("desk") == ["population", "eur"]
    assert scenario.assigned_needs("cities") == ["population"]  # kpi's need is sales's
    result = api.run(scenario, propagation="explicit")
    assert result.outcomes["success"] == 12
    said = {(m.sender, m.recipient, m.kind.value) for m in result.raw.messages[0]}
    assert {("desk", "fx", "task"), ("fx", "desk", "result"), ("desk", "lead", "result")} <= said


def test_a_worker_that_crashes_is_a_failed_result_the_manager_reads_like_any_other() -> None:
    scenario = api.load(team(fx_faults=[{"kind": "crash", "p": 1.0}]))
    both = api.run(scenario, propagation="both")
    assert both.explicit.outcomes["contained"] == 12
    assert both.implicit.outcomes["contaminated"] == 12
    for messages in both.explicit.raw.messages.values():
        (final,) = [m for m in messages if m.recipient == "runner"]
        assert any(e.origin == "fx" and e.code == "internal_error" for e in final.errors)
        assert "eur" not in claims_of(final)  # heeded: not stated as a fact
