"""Modelling mistakes the loader rejects, and the warnings it gives (errorflow.scenario
.references): each at the path (and so the line) that causes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from errorflow.scenario.checks.references import modelling_warnings
from errorflow.scenario.loader import ScenarioError, load_text

CHAIN = """\
name: chain
world:
  tables:
    tickets:
      rows:
        - {id: T-1, product: router}
    kb:
      rows:
        - {id: KB-1, product: router}
tools:
  ticket: {kind: lookup, table: tickets, args: {id: {}, field: {}}, select: field}
  kb: {kind: search, table: kb, args: {product: {}}}
agents:
  triage: {role: researcher, tools: [ticket], sends_to: [retriever]}
  retriever: {role: researcher, tools: [kb], sends_to: [writer]}
  writer: {role: writer}
task:
  prompt: p
  needs:
    - {id: product, tool: ticket, wording: the product, args: {id: T-1, field: product}}
    - {id: kb, tool: kb, wording: kb, args: {product: {from: product}}}
"""


def problems(text: str) -> list[tuple[str, int, str]]:
    with pytest.raises(ScenarioError) as info:
        load_text(text, "s.yaml")
    return [(p.path, p.line or 0, p.message) for p in info.value.problems]


def test_the_chain_is_valid() -> None:
    s = load_text(CHAIN)
    assert s.terminal_agents() == ["writer"] and s.reaches("triage", "writer")
    assert modelling_warnings(s) == []


def test_a_need_whose_tool_no_agent_holds() -> None:
    text = CHAIN.replace("tools: [kb], sends_to", "tools: [], sends_to")
    [(path, line, msg)] = problems(text)
    assert path == "task.needs.1.tool" and line == 21
    assert "no agent holds tool 'kb'" in msg and "add it to the tools" in msg


def test_a_need_held_only_by_an_agent_that_does_not_fetch() -> None:
    text = CHAIN.replace(
        "retriever: {role: researcher, tools: [kb]",
        "retriever: {role: r, behaviour: route, tools: [kb]",
    )
    [(path, _, msg)] = problems(text)
    assert path == "task.needs.1.tool" and "held only by retriever" in msg


def test_dependencies_unknown_on_itself_and_in_a_cycle() -> None:
    unknown = CHAIN.replace("{from: product}", "{from: prodcut}")
    [(path, line, msg)] = problems(unknown)
    assert path == "task.needs.1.args.product.from" and line == 21
    assert "did you mean 'product'?" in msg
    itself = CHAIN.replace("{from: product}", "{from: kb}")
    assert "cannot depend on itself" in problems(itself)[0][2]
    cycle = CHAIN.replace(
        "args: {id: T-1, field: product}", "args: {id: {from: kb}, field: product}"
    )
    [(path, _, msg)] = problems(cycle)
    assert path == "task.needs.0.args" and "cycle: product -> kb -> product" in msg


def test_a_dependency_found_by_an_agent_whose_results_never_arrive() -> None:
    # triage now sends straight to the writer: retriever never sees the product.
    text = CHAIN.replace(
        "tools: [ticket], sends_to: [retriever]", "tools: [ticket], sends_to: [writer]"
    )
    [(path, _, msg)] = problems(text)
    assert path == "task.needs.1.args.product.from"
    assert "found by triage, whose results never reach 'retriever'" in msg


def test_a_sends_to_cycle_is_an_agent_nobody_reaches() -> None:
    text = CHAIN.replace("writer: {role: writer}", "writer: {role: writer, sends_to: [retriever]}")
    [(path, _, msg)] = problems(text)
    assert path == "agents.retriever.sends_to"
    assert "cycle: retriever -> writer -> retriever" in msg and "no task ever reaches" in msg


def test_waits_for_declares_the_same_edges_from_the_receiving_side() -> None:
    text = CHAIN.replace(", sends_to: [retriever]}", "}").replace(
        "tools: [kb], sends_to", "tools: [kb], waits_for: [triage], sends_to"
    )
    s = load_text(text)
    assert s.upstream_of("retriever") == ["triage"] and s.agents["triage"].sends_to == ["retriever"]
    assert "waits_for" not in s.model_dump()["agents"]["writer"]  # unused: not dumped
    bad = CHAIN.replace("writer: {role: writer}", "writer: {role: writer, waits_for: [nobody]}")
    assert problems(bad)[0][0] == "agents.writer.waits_for.0"


def test_a_role_of_ones_own_needs_a_behaviour() -> None:
    text = CHAIN.replace("writer: {role: writer}", "writer: {role: editor}")
    [(path, _, msg)] = problems(text)
    assert path == "agents.writer.role" and "behaviour: gather | synthesise" in msg
    load_text(
        CHAIN.replace("writer: {role: writer}", "writer: {role: editor, behaviour: synthesise}")
    )


def test_warnings_for_tools_nobody_uses() -> None:
    text = CHAIN.replace(
        "tools:\n", "tools:\n  spare: {kind: metric_store}\n  sink: {kind: report_sink}\n"
    ).replace("writer: {role: writer}", "writer: {role: writer, tools: [sink]}")
    s = load_text(text.replace("[ticket], sends_to", "[ticket, sink], sends_to"))
    assert modelling_warnings(s) == [
        (("tools", "spare"), "tool 'spare' is defined but no agent holds it"),
        (
            ("agents", "triage", "tools", 1),
            "'triage' never calls 'sink': only an agent that synthesises (a writer) "
            "delivers a report",
        ),
    ]


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    """`errorflow validate PATH` as a user runs it."""
    command = [sys.executable, "-m", "errorflow", "validate", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    "mistake",
    [
        ("tools: [kb], sends_to", "tools: [], sends_to"),
        ("{from: product}", "{from: kb}"),
        ("writer: {role: writer}", "writer: {role: writer, sends_to: [retriever]}"),
    ],
)
def test_validate_rejects_modelling_mistakes_with_exit_2(
    tmp_path: Path, mistake: tuple[str, str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(CHAIN.replace(*mistake))
    done = validate(path)
    assert done.returncode == 2, done.stderr
    assert f"{path}:" in done.stderr and "Traceback" not in done.stderr


def test_validate_prints_warnings_at_their_line_and_still_passes(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(CHAIN.replace("tools:\n", "tools:\n  spare: {kind: metric_store}\n"))
    done = validate(path)
    assert done.returncode == 0, done.stderr
    assert f"warning: {path}:11:3: tools.spare: tool 'spare' is defined but no agent holds it" in (
        " ".join(done.stderr.split())
    )


def test_validate_warns_of_a_need_whose_true_answer_is_empty(tmp_path: Path) -> None:
    """A search that rightly finds nothing reads as an `empty_result` failure."""
    path = tmp_path / "e.yaml"
    path.write_text(CHAIN.replace("- {id: KB-1, product: router}", "- {id: KB-1, product: modem}"))
    done = validate(path)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"warning: {path}:21:7: task.needs.1: need 'kb': its true answer is empty ([])" in said
    assert "product" not in said.split("task.needs.1")[0]  # the other need's answer is not


# -- silent faults and second sources ------------------------------------------------------

SOURCED = """\
name: sourced
world:
  metrics: {rev: 100, cost: 40}
  tables:
    acc:
      rows:
        - {id: A-1, owner: Dana}
        - {id: A-2, owner: Sam}
tools:
  cache: {kind: metric_store, faults: [{kind: stale, p: 0.3}]}
  origin: {kind: metric_store}
  index: {kind: lookup, table: acc, args: {id: {}, field: {}}, select: field}
  crm: {kind: lookup, table: acc, args: {id: {}, field: {}}, select: field}
agents:
  analyst: {role: researcher, tools: [cache, index], sends_to: [reviewer]}
  reviewer: {role: reviewer, tools: [origin, crm]}
task:
  prompt: p
  needs:
    - {id: rev, tool: cache, sources: [origin], arg: name, wording: revenue, value: rev}
    - {id: owner, tool: index, sources: [crm], wording: owner, args: {id: A-1, field: owner}}
"""


def test_a_checker_holding_only_the_second_sources_is_not_warned_about() -> None:
    s = load_text(SOURCED)
    assert s.task.needs[0].tools == ["cache", "origin"]
    assert modelling_warnings(s) == []
    without = load_text(SOURCED.replace("sources: [origin], ", "").replace("sources: [crm], ", ""))
    assert [loc for loc, _ in modelling_warnings(without)] == [
        ("agents", "reviewer", "tools", 0),
        ("agents", "reviewer", "tools", 1),
        ("agents", "reviewer", "tools"),  # and it holds no tool for the claims it checks
    ]


def test_an_inspector_or_challenger_on_a_second_source_is_not_warned_about() -> None:
    inspector = SOURCED.replace(
        "reviewer: {role: reviewer, tools: [origin, crm]}",
        "reviewer: {role: writer, inspector: {tools: [origin, crm]}}",
    )
    assert modelling_warnings(load_text(inspector)) == []
    challenger = SOURCED.replace("role: reviewer,", "role: researcher, challenge: 1.0,")
    assert modelling_warnings(load_text(challenger)) == []


@pytest.mark.parametrize(
    ("mistake", "path", "message"),
    [
        ("sources: [origin]", "task.needs.0.sources.0", "unknown tool 'orign'"),
        ("sources: [origin]", "task.needs.0.sources.0", "is the need's tool"),
        ("sources: [origin]", "task.needs.0.sources.1", "is named twice"),
        ("sources: [crm]", "task.needs.1.sources.0", "cannot serve need 'owner'"),
    ],
)
def test_a_second_source_must_be_another_tool_taking_the_needs_arguments(
    mistake: str, path: str, message: str
) -> None:
    wrong = {
        "unknown tool 'orign'": "sources: [orign]",
        "is the need's tool": "sources: [cache]",
        "is named twice": "sources: [origin, origin]",
        "cannot serve need 'owner'": "sources: [origin]",  # a metric store takes `name`
    }[message]
    [(where, _, msg)] = problems(SOURCED.replace(mistake, wrong))
    assert where == path and message in msg


@pytest.mark.parametrize(
    ("fault", "path", "message"),
    [
        ("{kind: transient, drift: 0.2}", "drift", "drift applies only to kind 'stale'"),
        ("{kind: stale, value: 90, drop: 2}", "drop", "not both"),
        ("{kind: stale, drift: 0}", "drift", "leaves the answer right"),
        ("{kind: corrupt, mode: truncated_json}", "mode", "expected one of 'unit', 'digits'"),
        ("{kind: timeout, mode: digits}", "mode", "applies only to kind 'corrupt'"),
    ],
)
def test_a_silent_faults_fields_must_fit_its_kind(fault: str, path: str, message: str) -> None:
    [(where, _, msg)] = problems(SOURCED.replace("{kind: stale, p: 0.3}", fault))
    assert where == f"tools.cache.faults.0.{path}" and message in msg


def test_wrong_entity_needs_another_entity_to_answer_for() -> None:
    one_metric = SOURCED.replace("{rev: 100, cost: 40}", "{rev: 100}").replace(
        "{kind: stale, p: 0.3}", "{kind: wrong_entity}"
    )
    [(where, _, msg)] = problems(one_metric)
    assert where == "tools.cache.faults.0.kind" and "fewer than two metrics" in msg
    python = """\
name: py
tools:
  stock:
    kind: python
    function: errorflow.examples.inventory:stock_level
    args: {sku: {}, warehouse: {}}
    faults: [{kind: wrong_entity}]
agents: {r: {role: researcher, tools: [stock]}}
task:
  prompt: p
  needs: [{id: s, tool: stock, wording: w, args: {sku: SKU-1001, warehouse: north}}]
"""
    [(where, _, msg)] = problems(python)
    assert where == "tools.stock.faults.0.kind" and "a second need, or an enum" in msg
    load_text(python.replace("warehouse: {}", "warehouse: {enum: [north, south]}"))
    load_text(python.replace("    args: {sku: {}, warehouse: {}}\n", ""))  # a Literal hint
    sink = SOURCED.replace(
        "origin: {kind: metric_store}", "origin: {kind: report_sink, faults: [{kind: corrupt}]}"
    )
    assert any("cannot apply to a report_sink" in m for _, _, m in problems(sink))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            (
                "retriever: {role: researcher",
                "retriever: {faults: [{kind: drop, p: 1, to: [triage]}], role: researcher",
            ),
            "'retriever' never sends to 'triage' (its messages go to writer): this drop fault",
        ),
        (
            ("writer: {role: writer}", "writer: {role: writer, faults: [{kind: slow, p: 1}]}"),
            "a slow reply to the runner is never late",
        ),
        (
            ("triage: {role: researcher", "triage: {max_revisions: 3, role: researcher"),
            "'triage' reviews nothing (role 'researcher'): max_revisions is read by reviewers",
        ),
    ],
)
def test_settings_that_can_never_act_are_warned_of(change: tuple[str, str], words: str) -> None:
    text = CHAIN.replace(*change)
    assert text != CHAIN
    found = [message for _, message in modelling_warnings(load_text(text))]
    assert any(words in m for m in found), found
