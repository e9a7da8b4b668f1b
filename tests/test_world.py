"""The tool world on its own: seeded fault plans, argument mangling and pre-flight
validation, hidden identifiers, the report sink's side effect, ground truth."""

from __future__ import annotations

import asyncio
import contextlib
import random
from types import MappingProxyType
from typing import Any

import pytest

from errorflow.core.tool_errors import (
    CallTimeout,
    ConnectTimeout,
    HTTPStatusError,
    SchemaViolation,
    ToolException,
    UnknownTool,
    UnknownValue,
)
from errorflow.faults.tool import PermissionFault, TimeoutFault, TransientFault
from errorflow.faults.tool_base import FaultPlan
from errorflow.scenario.loader import load_text
from errorflow.scenario.spec.catalog import ARG_MODELS, SearchPapersArgs
from errorflow.scenario.spec.model import Scenario
from errorflow.world.tool_client import ToolClient, hidden_identifier, truth

BASE = """
name: world-test
seed: {seed}
world:
  metrics: {{fin.rev.2024: 1234, fin.cost.2024: 99}}
  papers:
    - {{id: p1, title: Attention Is All You Need, topic: transformer attention}}
    - {{id: p2, title: LSTM, topic: recurrent nets}}
  documents: {{d1: one, d2: two, d3: three, d4: four}}
tools:
{tools}
agents:
  a: {{role: researcher, tools: [metrics]}}
task:
  prompt: p
  needs:
    - {{id: rev, tool: metrics, wording: 2024年营收, value: fin.rev.2024}}
"""


def world(tools: str, seed: int = 0) -> Scenario:
    return load_text(BASE.format(seed=seed, tools=tools))


P30 = """
  metrics:
    kind: metric_store
    faults: [{kind: transient, p: 0.3}]
  search: {kind: paper_search}
"""


def hits(client: ToolClient, tool: str = "metrics", n: int = 200) -> list[bool]:
    args = client.validate(tool, {"name": "fin.rev.2024"})
    out = []
    for _ in range(n):
        try:
            client.invoke(tool, args, timeout_s=30, idempotency_key=None)
        except ToolException:
            out.append(True)
        else:
            out.append(False)
    return out


# -- seeding ------------------------------------------------------------------------


def test_same_seed_trial_agent_same_hit_pattern() -> None:
    sc = world(P30, seed=7)
    pattern = hits(ToolClient(sc, 3, "a"))
    assert pattern == hits(ToolClient(sc, 3, "a"))
    assert 40 <= sum(pattern) <= 80  # p = 0.3 over 200 calls
    assert pattern != hits(ToolClient(world(P30, seed=8), 3, "a"))
    assert pattern != hits(ToolClient(sc, 4, "a"))
    assert pattern != hits(ToolClient(sc, 3, "b"))


def test_a_fault_on_another_tool_does_not_change_the_draws() -> None:
    before = hits(ToolClient(world(P30, seed=7), 0, "a"))
    with_other = P30.replace(
        "search: {kind: paper_search}",
        "search: {kind: paper_search, faults: [{kind: transient, p: 0.9}, {kind: empty}]}",
    )
    client = ToolClient(world(with_other, seed=7), 0, "a")
    # Interleave calls to the other tool: still the same pattern on metrics.
    other = client.validate("search", {"query": "x"})
    pattern = []
    for _ in range(200):
        pattern += hits(client, n=1)
        with contextlib.suppress(ToolException):
            client.invoke("search", other, timeout_s=30, idempotency_key=None)
    assert pattern == before


def test_appending_a_fault_to_the_same_tool_keeps_the_first_ones_draws() -> None:
    one = [TransientFault(kind="transient", p=0.3)]
    two = [*one, TimeoutFault(kind="timeout", p=0.3)]
    a = FaultPlan(one, lambda: random.Random("s"))
    b = FaultPlan(two, lambda: random.Random("s"))
    pa = [a.next() is not None for _ in range(300)]
    pb = [(f := b.next()) is not None and f.kind == "transient" for _ in range(300)]
    assert pa == pb


def test_fault_plan_first_n_and_always() -> None:
    plan = FaultPlan([TransientFault(kind="transient", first_n=2)], lambda: random.Random(1))
    assert [plan.next() is not None for _ in range(5)] == [True, True, False, False, False]
    always = FaultPlan([PermissionFault(kind="permission")], lambda: random.Random(1))
    assert all(always.next() is not None for _ in range(10))
    assert FaultPlan([], lambda: random.Random(1)).next() is None


def test_partial_item_draws_are_per_tool() -> None:
    spec = """
  metrics: {kind: metric_store}
  fetch:
    kind: batch_fetch
    faults: [{kind: partial, item_p: 0.5}]
  other:
    kind: batch_fetch
    faults: [{kind: partial, item_p: 0.5}]
"""
    ids = {"ids": ["d1", "d2", "d3", "d4"]}

    def errors(call_other: bool) -> list[list[str]]:
        client = ToolClient(world(spec), 0, "a")
        out = []
        for _ in range(20):
            if call_other:
                client.invoke(
                    "other", client.validate("other", ids), timeout_s=30, idempotency_key=None
                )
            r = client.invoke(
                "fetch", client.validate("fetch", ids), timeout_s=30, idempotency_key=None
            )
            out.append(sorted(r.item_errors))
        return out

    assert errors(False) == errors(True)


# -- faults as exceptions ---------------------------------------------------------------


def client_with(kind: str, fault: dict[str, Any], **extra: Any) -> ToolClient:
    spec = {"kind": kind, "faults": [fault], **extra}
    sc = Scenario.model_validate(
        {
            **world("  metrics: {kind: metric_store}").model_dump(),
            "tools": {"metrics": {"kind": "metric_store"}, "t": spec},
        }
    )
    return ToolClient(sc, 0, "a")


@pytest.mark.parametrize(
    ("fault", "exc_type", "status"),
    [
        ({"kind": "transient", "status": 502}, HTTPStatusError, 502),
        ({"kind": "transient"}, ConnectTimeout, None),
        ({"kind": "timeout"}, CallTimeout, None),
        ({"kind": "rate_limit"}, HTTPStatusError, 429),
        ({"kind": "permission"}, HTTPStatusError, 403),
        ({"kind": "permission", "status": 401}, HTTPStatusError, 401),
        ({"kind": "not_found"}, HTTPStatusError, 404),
    ],
)
def test_faults_raise_library_shaped_exceptions(
    fault: dict[str, Any], exc_type: type[Exception], status: int | None
) -> None:
    c = client_with("metric_store", {**fault, "error_text": "custom text"})
    with pytest.raises(exc_type) as info:
        c.invoke("t", c.validate("t", {"name": "fin.rev.2024"}), timeout_s=9, idempotency_key=None)
    assert getattr(info.value, "status", None) == status
    assert info.value.raw == "custom text"  # type: ignore[attr-defined]


def test_rate_limit_default_retry_after() -> None:
    c = client_with("metric_store", {"kind": "rate_limit"})
    with pytest.raises(HTTPStatusError) as info:
        c.invoke("t", c.validate("t", {"name": "fin.rev.2024"}), timeout_s=9, idempotency_key=None)
    assert info.value.retry_after_s == 1.0


def test_timeout_waits_the_client_timeout_and_a_short_hang_is_only_slow() -> None:
    c = client_with("metric_store", {"kind": "timeout", "duration_s": 100})
    args = c.validate("t", {"name": "fin.rev.2024"})
    with pytest.raises(CallTimeout) as info:
        c.invoke("t", args, timeout_s=9, idempotency_key=None)
    assert info.value.waited_s == 9
    slow = client_with("metric_store", {"kind": "timeout", "duration_s": 4})
    r = slow.invoke("t", args, timeout_s=9, idempotency_key=None)
    assert r.value == 1234 and r.duration_s == 4


def test_soft_faults_return_bodies() -> None:
    c = client_with("metric_store", {"kind": "business_rule", "reason": "closed"})
    args = c.validate("t", {"name": "fin.rev.2024"})
    r = c.invoke("t", args, timeout_s=9, idempotency_key=None)
    assert r.business_error == "closed" and r.value == {"success": False, "reason": "closed"}
    e = client_with("paper_search", {"kind": "empty"})
    r = e.invoke("t", e.validate("t", {"query": "attention"}), timeout_s=9, idempotency_key=None)
    assert r.empty and r.value == []


def test_bad_argument_is_decided_by_the_argument() -> None:
    c = ToolClient(world("  metrics: {kind: metric_store, faults: [{kind: bad_args}]}"), 0, "a")
    bad = c.validate("metrics", {"name": "2024年营收"})
    for _ in range(5):
        with pytest.raises(UnknownValue) as info:
            c.invoke("metrics", bad, timeout_s=9, idempotency_key=None)
        assert info.value.options == ["fin.cost.2024", "fin.rev.2024"]
        assert info.value.received == "2024年营收" and info.value.field == "name"
    good = c.validate("metrics", {"name": "fin.rev.2024"})
    assert c.invoke("metrics", good, timeout_s=9, idempotency_key=None).value == 1234


def test_hidden_identifier() -> None:
    sc = world("  metrics: {kind: metric_store, faults: [{kind: bad_args}]}")
    need = sc.task.needs[0]
    assert all(hidden_identifier(sc, t, need) for t in range(5))
    assert not hidden_identifier(world("  metrics: {kind: metric_store}"), 0, need)
    sc_p = world("  metrics: {kind: metric_store, faults: [{kind: bad_args, p: 0.5}]}")
    hidden = [hidden_identifier(sc_p, t, need) for t in range(200)]
    assert hidden == [hidden_identifier(sc_p, t, need) for t in range(200)]
    assert 70 < sum(hidden) < 130
    sc_n = world("  metrics: {kind: metric_store, faults: [{kind: bad_args, first_n: 2}]}")
    assert [hidden_identifier(sc_n, t, need) for t in range(4)] == [True, True, False, False]
    zero = world("  metrics: {kind: metric_store, faults: [{kind: bad_args, first_n: 0}]}")
    assert not hidden_identifier(zero, 0, need)


# -- mangling and pre-flight validation -------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "missing", "unexpected", "field"),
    [
        ("missing_field", True, False, "query"),
        ("wrong_type", False, False, "query"),
        ("extra_field", False, True, "verbose"),
        ("truncated_json", False, False, "(arguments)"),
    ],
)
def test_mangled_calls_fail_validation(
    mode: str, missing: bool, unexpected: bool, field: str
) -> None:
    c = client_with("paper_search", {"kind": "malformed_call", "mode": mode})
    # An optional argument first: mangling must still hit the required one.
    mangled = c.mangle("t", {"limit": 5, "query": "attention"})
    if mode == "truncated_json":
        assert isinstance(mangled, str)
    with pytest.raises(SchemaViolation) as info:
        c.validate("t", mangled)
    assert info.value.missing is missing and info.value.unexpected is unexpected
    assert info.value.field == field


def test_mangle_without_fault_is_identity_and_p_is_seeded() -> None:
    c = ToolClient(world("  metrics: {kind: metric_store}"), 0, "a")
    assert c.mangle("metrics", {"name": "x"}) == {"name": "x"}
    spec = "  metrics: {kind: metric_store, faults: [{kind: malformed_call, p: 0.5}]}"
    a = ToolClient(world(spec), 0, "a")
    b = ToolClient(world(spec), 0, "a")
    ma = [a.mangle("metrics", {"name": "x"}) for _ in range(50)]
    assert ma == [b.mangle("metrics", {"name": "x"}) for _ in range(50)]
    assert 10 < sum(m != {"name": "x"} for m in ma) < 40


def test_validate_messages() -> None:
    c = ToolClient(world("  metrics: {kind: metric_store}"), 0, "a")
    with pytest.raises(UnknownTool) as tool:
        c.validate("nope", {})
    assert tool.value.options == ["metrics"]
    with pytest.raises(SchemaViolation) as arr:
        c.validate("metrics", "[1, 2]")
    assert arr.value.field == "(arguments)" and arr.value.received == [1, 2]
    with pytest.raises(SchemaViolation) as short:
        c.validate("metrics", {"name": ""})
    assert short.value.field == "name" and "at least 1" in short.value.constraint
    assert c.validate("metrics", '{"name": "fin.rev.2024"}').model_dump() == {
        "name": "fin.rev.2024"
    }


# -- report sink and truth -------------------------------------------------------------


def test_report_sink_deduplicates_on_the_key() -> None:
    c = ToolClient(world("  metrics: {kind: metric_store}\n  sink: {kind: report_sink}"), 0, "a")
    args = c.validate("sink", {"title": "T", "body": "B"})
    c.invoke("sink", args, timeout_s=9, idempotency_key="k1")
    c.invoke("sink", args, timeout_s=9, idempotency_key="k1")
    c.invoke("sink", args, timeout_s=9, idempotency_key="k2")
    c.invoke("sink", args, timeout_s=9, idempotency_key=None)
    assert [r["key"] for r in c.sent_reports] == ["k1", "k2", None]
    assert c.sent_reports[0] == {"title": "T", "key": "k1"}
    again = c.invoke("sink", args, timeout_s=9, idempotency_key="k1")
    assert again.value == {"sent": True, "title": "T"}  # the first send's receipt


def test_calls_are_checked_against_the_catalog_schema() -> None:
    c = ToolClient(world("  metrics: {kind: metric_store}\n  search: {kind: paper_search}"), 0, "a")
    assert isinstance(c.validate("metrics", {"name": "x"}), ARG_MODELS["metric_store"])
    assert isinstance(c.validate("search", MappingProxyType({"query": "x"})), SearchPapersArgs)
    call = {"name": "x"}
    assert c.mangle("metrics", call) is not call  # the world never changes the caller's call


def test_truth() -> None:
    sc = world(
        "  metrics: {kind: metric_store}\n  search: {kind: paper_search}\n"
        "  fetch: {kind: batch_fetch}"
    )
    need = sc.task.needs[0]
    assert truth(sc.world, sc.tools, need) == 1234
    papers = need.model_copy(update={"tool": "search", "value": "attention"})
    assert truth(sc.world, sc.tools, papers) == ["p1"]
    docs = need.model_copy(update={"tool": "fetch", "value": ["d1", "zz"]})
    assert truth(sc.world, sc.tools, docs) == {"d1": "one", "zz": None}


# -- silent wrong answers -----------------------------------------------------------------

SILENT_WORLD = """
name: silent
seed: 5
world:
  metrics: {{fin.rev.2024: 1234, fin.cost.2024: 99, usr.count.2024: 5120}}
  papers:
    - {{id: p1, title: Attention Is All You Need, topic: transformer attention}}
    - {{id: p2, title: LSTM, topic: recurrent nets}}
    - {{id: p3, title: Transformers again, topic: transformer attention}}
  documents: {{d1: one doc, d2: two doc, d3: three doc}}
  tables:
    acc:
      rows:
        - {{id: A-1, region: north, revenue: 1200}}
        - {{id: A-2, region: south, revenue: 3400}}
        - {{id: A-3, region: south, revenue: 560}}
tools:
  metrics: {{kind: metric_store, faults: [{fault}]}}
  papers: {{kind: paper_search, faults: [{fault}]}}
  docs: {{kind: batch_fetch, faults: [{fault}]}}
  account: {{kind: lookup, table: acc, args: {{id: {{type: string}}}}, faults: [{fault}]}}
  revenues:
    kind: lookup
    table: acc
    args: {{id: {{type: array}}}}
    returns: [revenue]
    faults: [{fault}]
  by_region: {{kind: search, table: acc, args: {{region: {{type: string}}}}, faults: [{fault}]}}
  stock:
    kind: python
    function: errorflow.examples.inventory:stock_level
    faults: [{fault}]
agents:
  r: {{role: researcher, tools: [metrics, papers, docs, account, revenues, by_region, stock]}}
task:
  prompt: p
  needs: [{{id: rev, tool: metrics, wording: revenue, value: fin.rev.2024}}]
"""
SILENT_CALLS: dict[str, dict[str, Any]] = {
    "metrics": {"name": "fin.rev.2024"},
    "papers": {"query": "transformer"},
    "docs": {"ids": ["d1", "d2"]},
    "account": {"id": "A-1"},
    "revenues": {"id": ["A-1", "A-2"]},
    "by_region": {"region": "south"},
    "stock": {"sku": "SKU-1001", "warehouse": "north"},
}


def silent_client(fault: str, trial: int = 0) -> ToolClient:
    return ToolClient(load_text(SILENT_WORLD.format(fault=fault)), trial, "r")


def answer(client: ToolClient, tool: str) -> Any:
    args = client.validate(tool, SILENT_CALLS[tool])
    return asyncio.run(client.ainvoke(tool, args, timeout_s=9, idempotency_key=None))


def test_fault_free_answers_of_the_silent_world() -> None:
    c = ToolClient(load_text(SILENT_WORLD.format(fault="")), 0, "r")
    got = {t: answer(c, t).value for t in SILENT_CALLS}
    assert got == {
        "metrics": 1234,
        "papers": ["p1", "p3"],
        "docs": {"d1": "one doc", "d2": "two doc"},
        "account": {"id": "A-1", "region": "north", "revenue": 1200},
        "revenues": {"A-1": 1200, "A-2": 3400},
        "by_region": ["A-2", "A-3"],
        "stock": {"ok": True, "sku": "SKU-1001", "warehouse": "north", "units": 1200},
    }


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            "{kind: stale}",  # 10 % lower, one element missing, text as it was
            {
                "metrics": 1111,
                "papers": ["p1"],
                "docs": {"d1": "one doc", "d2": "two doc"},
                "account": {"id": "A-1", "region": "north", "revenue": 1080},
                "revenues": {"A-1": 1080, "A-2": 3060},
                "by_region": ["A-2"],
                "stock": {"ok": True, "sku": "SKU-1001", "warehouse": "north", "units": 1080},
            },
        ),
        (
            "{kind: stale, drift: 0.5, drop: 5}",  # a list keeps one element: never empty
            {"metrics": 1851, "papers": ["p1"], "revenues": {"A-1": 1800, "A-2": 5100}},
        ),
        ("{kind: stale, value: 1000}", {"metrics": 1000, "papers": 1000}),
        (
            "{kind: corrupt}",  # numbers ×1000, the rest cut in half
            {
                "metrics": 1234000,
                "papers": ["p1"],
                "docs": {"d1": "one", "d2": "two"},
                "account": {"id": "A", "region": "no", "revenue": 1200000},
                "stock": {"ok": True, "sku": "SKU-", "warehouse": "no", "units": 1200000},
            },
        ),
        ("{kind: corrupt, mode: unit}", {"metrics": 1234000, "papers": ["p1", "p3"]}),
        ("{kind: corrupt, mode: truncate}", {"metrics": 1234, "by_region": ["A-2"]}),
    ],
)
def test_stale_and_corrupt_answers_succeed_wrong(fault: str, expected: dict[str, Any]) -> None:
    c = silent_client(fault)
    for tool, value in expected.items():
        result = answer(c, tool)
        assert result.value == value, tool
        assert not result.empty and result.business_error is None and not result.item_errors


def test_corrupt_digits_swaps_two_adjacent_different_digits() -> None:
    c = silent_client("{kind: corrupt, mode: digits}")
    assert answer(c, "metrics").value in (2134, 1324, 1243)
    assert c.fired == ["tools.metrics.faults[0]"]
    assert answer(c, "papers").value == ["p1", "p3"]  # no two adjacent digits: as it was
    assert c.fired == ["tools.metrics.faults[0]"]  # and struck nothing: not counted as fired
    revenues = answer(c, "revenues").value
    assert revenues != {"A-1": 1200, "A-2": 3400} and sorted(revenues) == ["A-1", "A-2"]


def test_wrong_entity_answers_for_another_entity() -> None:
    answers = {t: answer(silent_client("{kind: wrong_entity}"), t).value for t in SILENT_CALLS}
    assert answers["metrics"] in (99, 5120)
    assert answers["papers"] == ["p2"]  # the other topic's hits
    docs = answers["docs"]  # other documents, filed under the ids asked for
    assert list(docs) == ["d1", "d2"] and docs != {"d1": "one doc", "d2": "two doc"}
    assert answers["account"]["id"] in ("A-2", "A-3")  # another record of the table
    assert answers["revenues"] != {"A-1": 1200, "A-2": 3400}
    assert list(answers["revenues"]) == ["A-1", "A-2"]
    assert answers["by_region"] == ["A-1"]  # the other region's hits
    assert answers["stock"]["warehouse"] == "south"  # the other value of a Literal hint


def test_which_entity_is_drawn_from_the_faults_own_stream() -> None:
    picks = {
        trial: [answer(silent_client("{kind: wrong_entity}", trial), "account").value["id"]]
        for trial in range(12)
    }
    assert set(map(tuple, picks.values())) == {("A-2",), ("A-3",)}  # both drawn, per trial
    again = [answer(silent_client("{kind: wrong_entity}", 3), "account").value["id"]]
    assert again == picks[3]


@pytest.mark.parametrize("kind", ["stale", "wrong_entity", "corrupt"])
def test_each_silent_kind_fires_at_its_rate_and_is_named_by_its_place(kind: str) -> None:
    sc = world(f"  metrics:\n    kind: metric_store\n    faults: [{{kind: {kind}, p: 0.3}}]")
    c = ToolClient(sc, 0, "a")
    args = c.validate("metrics", {"name": "fin.rev.2024"})
    n = 2000
    wrong = sum(
        c.invoke("metrics", args, timeout_s=9, idempotency_key=None).value != 1234 for _ in range(n)
    )
    assert abs(wrong - n * 0.3) <= 3 * (n * 0.3 * 0.7) ** 0.5
    assert c.fired == ["tools.metrics.faults[0]"] * wrong


def test_a_silent_fault_appended_after_older_ones_keeps_their_draws() -> None:
    older = "  metrics:\n    kind: metric_store\n    faults: [{kind: transient, p: 0.3}]"
    newer = older.replace("p: 0.3}]", "p: 0.3}, {kind: stale, p: 0.5}, {kind: corrupt}]")
    assert hits(ToolClient(world(older), 2, "a")) == hits(ToolClient(world(newer), 2, "a"))


def test_fired_faults_are_named_by_their_place_in_the_tools_faults() -> None:
    spec = (
        "  metrics:\n    kind: metric_store\n    faults: [{kind: malformed_call, first_n: 1},"
        " {kind: bad_args}, {kind: transient, first_n: 1}, {kind: stale}]"
    )
    c = ToolClient(world(spec), 0, "a")
    assert c.mangle("metrics", {"name": "fin.rev.2024"}) != {"name": "fin.rev.2024"}
    args = c.validate("metrics", {"name": "fin.rev.2024"})
    with pytest.raises(ConnectTimeout):
        c.invoke("metrics", args, timeout_s=9, idempotency_key=None)
    c.invoke("metrics", args, timeout_s=9, idempotency_key=None)
    assert c.fired == [
        "tools.metrics.faults[0]",
        "tools.metrics.faults[2]",
        "tools.metrics.faults[3]",
    ]
