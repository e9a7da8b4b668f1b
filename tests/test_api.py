"""The Python API (errorflow.api), the README's example, and the systems it is for:
chains of tool-using agents and dependent needs, run end to end in-process."""

from __future__ import annotations

import gc
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from errorflow import api
from errorflow.core.errors import InputError
from errorflow.scenario.loader import ScenarioError
from errorflow.store.readers import get_run
from errorflow.store.trial_store import load_trace

README = Path(__file__).resolve().parents[1] / "README.md"

#: The chain of the issue, written with the built-in kinds only (a ticket's fields
#: squeezed into metric keys, the KB as a paper index).
CHAIN = {
    "name": "support-chain",
    "seed": 11,
    "trials": 100,
    "world": {
        "metrics": {"ticket-4711.priority": "high", "ticket-4711.product": "router-x2"},
        "papers": [
            {"id": "kb-101", "title": "Resetting the router-x2", "topic": "router reset"},
            {"id": "kb-102", "title": "Firmware update", "topic": "router firmware"},
        ],
    },
    "tools": {"ticket_db": {"kind": "metric_store"}, "kb_search": {"kind": "paper_search"}},
    "agents": {
        "triage": {"role": "researcher", "tools": ["ticket_db"], "sends_to": ["retriever"]},
        "retriever": {"role": "researcher", "tools": ["kb_search"], "sends_to": ["responder"]},
        "responder": {"role": "writer"},
    },
    "task": {
        "prompt": "Answer ticket 4711.",
        "needs": [
            {
                "id": "priority",
                "tool": "ticket_db",
                "wording": "the priority",
                "value": "ticket-4711.priority",
            },
            {
                "id": "product",
                "tool": "ticket_db",
                "wording": "the product",
                "value": "ticket-4711.product",
            },
            {
                "id": "articles",
                "tool": "kb_search",
                "arg": "query",
                "wording": "router reset",
                "value": "router reset",
            },
        ],
    },
}


def test_the_readme_example_runs_as_written() -> None:
    text = README.read_text()
    section = text.split("## Python API", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    exec(compile(block.group(1), "README.md", "exec"), {})


def test_a_fault_free_chain_of_tool_using_agents_succeeds() -> None:
    result = api.run(api.load(CHAIN), propagation="explicit")
    assert result.outcomes["success"] >= 90  # of 100 (small-local: ~5 % dropped arguments)
    records = result.records()
    assert len(records) == 100 and {r["trial"] for r in records} == set(range(100))


def test_with_faults_explicit_propagation_contaminates_fewer_trials() -> None:
    faulty = api.override(
        api.load(CHAIN),
        {
            "tools.ticket_db.faults": [{"kind": "timeout", "p": 0.3}],
            "tools.kb_search.faults": [{"kind": "transient", "status": 503, "p": 0.3}],
            "agents.triage.policy.strategy": "tell-model",
            "agents.retriever.policy.strategy": "tell-model",
        },
    )
    explicit = api.run(faulty, propagation="explicit").outcomes
    implicit = api.run(faulty, propagation="implicit").outcomes
    assert explicit["contaminated"] < implicit["contaminated"]
    assert implicit["contaminated"] >= 30  # the faults fired and were swallowed


def test_a_dependent_need_carries_an_upstream_failure_two_hops_deep() -> None:
    scenario = api.load("support-pipeline")
    implicit = api.run(scenario, propagation="implicit")
    explicit = api.run(scenario, propagation="explicit")
    failed = [r for r in implicit.records() if r["outcome"] == "contaminated"]
    assert failed and all(int(str(r["depth"])) >= 2 for r in failed)
    assert any("retriever" in r["contaminated_agents"] for r in failed)  # the dependent hop
    ex = explicit.outcomes
    assert ex["contained"] > 0 and ex["contaminated"] <= len(failed) // 4


def test_load_takes_a_dict_and_reports_problems_like_a_file() -> None:
    with pytest.raises(ScenarioError) as info:
        api.load({**CHAIN, "trials": "many"})
    assert "trials" in str(info.value)
    assert api.override(api.load(CHAIN), {"trials": 3}).trials == 3


def test_both_arms_in_one_call_with_their_paired_difference() -> None:
    both = api.run(api.load("contamination"), propagation="both", trials=20)
    assert isinstance(both, api.Paired)
    assert both.explicit.raw.propagation == "explicit"
    assert both.implicit.raw.propagation == "implicit"
    d = both.paired["contaminated"]
    assert d["n"] == 20 and d["diff"] < 0 and d["p"] < 0.001 and d["low"] <= d["diff"]
    assert len(both.records()) == 40
    assert repr(both).startswith("<Paired 20 trials: contaminated explicit")


def test_both_arms_are_one_group_of_the_store_a_report_pairs(tmp_path: Path) -> None:
    from errorflow.reports.report import build

    db = tmp_path / "both.db"
    both = api.run(api.load("contamination"), propagation="both", trials=12, db=db)
    assert isinstance(both, api.Paired) and both.explicit.db == both.implicit.db == db
    run = get_run(db, both.explicit.run_id)
    assert run is not None and run["group_id"] is not None
    data = build(db, run["group_id"])
    assert [a["label"] for a in data["arms"]] == ["explicit", "implicit"]
    assert data["paired"] == both.paired


@pytest.mark.parametrize("workers", [0, -1, 1.5, "two", True])
def test_a_number_of_workers_that_is_none_is_refused(workers: Any) -> None:
    with pytest.raises(InputError, match="workers"):
        api.run(api.load("contamination"), trials=1, workers=workers)
    with pytest.raises(InputError, match="workers"):
        api.run(api.load("contamination"), propagation="both", trials=1, workers=workers)


def test_records_carry_each_agents_label_and_a_short_repr() -> None:
    result = api.run(api.load("contamination"), propagation="implicit", trials=5)
    [row, *_] = result.records()
    assert row["labels"] == {"researcher": "contaminated", "writer": "contaminated"}
    assert len(repr(result)) < 200 and "contaminated 5" in repr(result)


def test_to_pandas_gives_a_row_per_trial() -> None:
    frame = api.run(api.load("contamination"), trials=6).to_pandas()
    assert list(frame["trial"]) == list(range(6)) and "outcome" in frame.columns


def test_run_has_typed_keywords_and_the_package_says_it_is_typed() -> None:
    parameters = inspect.signature(api.run).parameters
    assert {"trials", "seed", "propagation", "broker", "db", "workers"} <= set(parameters)
    assert (Path(api.__file__).parent / "py.typed").is_file()


def test_a_trace_loads_from_a_str_path(tmp_path: Path) -> None:
    db = str(tmp_path / "nb.db")
    result = api.run(api.load("contamination"), trials=2, db=db)
    trace = load_trace(db, result.run_id, 0)
    assert trace is not None


def test_records_name_the_origin_the_edges_and_the_faults_that_fired() -> None:
    rows = api.run(api.load("contamination"), propagation="implicit", trials=4).records()
    for row in rows:
        assert row["origin"] == {
            "agent": "researcher", "kind": "tool", "tool": "search_papers",
            "code": "permission_denied",
        }  # fmt: skip
        assert row["fired_faults"] == {"tools.search_papers.faults[0]": 1}
    assert any("writer->runner" in row["edges"] for row in rows)  # type: ignore[operator]


def test_a_fault_free_trial_has_no_origin_and_no_fired_fault() -> None:
    result = api.baseline(api.load("contamination"), trials=3)
    assert result.outcomes["success"] == 3
    assert all(r["origin"] is None and r["fired_faults"] == {} for r in result.records())


def test_traces_stay_readable_while_the_result_lives_and_go_with_it() -> None:
    result = api.run(api.load("contamination"), propagation="implicit", trials=3)
    trace = result.trace()
    assert trace.outcome == "contaminated" and trace.root_cause is not None
    assert result.trace(2).trial == 2
    with pytest.raises(api.NoSuchTrial):
        result.trace(7)
    db = result.db
    assert db.is_file()
    del result, trace
    gc.collect()
    assert not db.exists()


def test_a_sweep_gives_a_result_per_cell_paired_on_the_same_seeds() -> None:
    cells = api.sweep(
        api.load("contamination"), {"propagation": ["explicit", "implicit"]}, trials=6
    )
    assert list(cells.cells) == ["explicit", "implicit"]
    assert cells.cells["implicit"].outcomes["contaminated"] == 6
    assert cells.baselines["explicit"] is not None and cells.baselines["explicit"]["success"] == 6
    d = cells.paired("explicit", "implicit")["contaminated"]
    assert d["only_b"] == 6 - cells.cells["explicit"].outcomes["contaminated"] and d["diff"] < 0
    frame = cells.to_pandas()
    assert len(frame) == 12 and set(frame["cell"]) == {"explicit", "implicit"}
    assert cells.to_json()["cells"]["implicit"]["trials"] == 6
    with pytest.raises(InputError):
        api.sweep(api.load("contamination"), {"propagation": "explicit"})
    with pytest.raises(InputError, match="it has 'explicit', 'implicit'"):
        cells.paired("explicit", "blind-retry")
    with pytest.raises(InputError, match="given twice"):
        api.sweep(api.load("contamination"), {"seed": [1, 1]})


def test_a_path_is_a_str_or_a_path_for_run_and_trace(tmp_path: Path) -> None:
    for db in (str(tmp_path / "a.db"), tmp_path / "b.db"):
        result = api.run(api.load("contamination"), trials=1, db=db)
        assert result.db == Path(db) and result.trace(0).trial == 0
