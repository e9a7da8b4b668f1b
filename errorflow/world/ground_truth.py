"""Ground truth of a task: the correct answer to every need, dependencies followed.

A need's answer is its `expect` when the scenario states one, otherwise what its tool
returns, fault-free, for the right arguments: a dependent need's argument is taken
from the *correct* answer of the need it depends on, so a wrong value upstream makes
a downstream claim false, which is how the scorer follows an error across agents.
Built-in kinds answer from the world's older shapes (`truth`), declarative tools from
their tables (the same functions that serve calls), Python tools by calling the code
once per need, MCP tools by calling their server once per need.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from pydantic import JsonValue, ValidationError
from pydantic_core import to_jsonable_python

from errorflow.core.tool_context import TRUTH_TRIAL, ToolContext
from errorflow.core.tool_errors import ToolException
from errorflow.scenario.problems import NodePath, Problem, ScenarioError
from errorflow.scenario.spec.model import NeedSpec, Scenario
from errorflow.scenario.spec.need_model import FromNeed
from errorflow.world import records
from errorflow.world.mcp.truth import mcp_answer
from errorflow.world.tool_answer import json_answer
from errorflow.world.tool_catalog import ToolCatalog
from errorflow.world.tool_client import truth

#: How long one Python tool call for ground truth may take (seconds).
TRUTH_TIMEOUT_S = 30.0
#: Calls of a Python tool with a ToolContext before its truth is given up on.
TRUTH_TRIES = 5


def need_order(needs: list[NeedSpec]) -> list[NeedSpec]:
    """The needs with every dependency before the needs that use it (the loader has
    rejected cycles); otherwise in the task's order."""
    done: dict[str, NeedSpec] = {}
    by_id = {n.id: n for n in needs}

    def visit(need: NeedSpec) -> None:
        if need.id in done:
            return
        for dep in need.depends_on().values():
            if dep.from_ in by_id and dep.from_ not in done:
                visit(by_id[dep.from_])
        done[need.id] = need

    for need in needs:
        visit(need)
    return list(done.values())


def dependency_value(value: JsonValue, dep: FromNeed) -> JsonValue:
    """The argument a dependency gives: the need's value, or one field of a record."""
    if dep.field is None:
        return value
    return value.get(dep.field) if isinstance(value, dict) else None


def need_truths(scenario: Scenario, catalog: ToolCatalog | None = None) -> dict[str, JsonValue]:
    """The correct answer to each need, by need id."""
    values: dict[str, JsonValue] = {}
    catalog = catalog or ToolCatalog.of(scenario)
    for need in need_order(scenario.task.needs):
        if need.expect is not None:
            values[need.id] = need.expect
            continue
        args: dict[str, object] = {
            k: dependency_value(values.get(v.from_), v) if isinstance(v, FromNeed) else v
            for k, v in need.arguments().items()
        }
        values[need.id] = answer(scenario, catalog, need, args)
    return values


def empty_truths(scenario: Scenario, truths: Mapping[str, JsonValue]) -> list[tuple[NodePath, str]]:
    """A warning (place, words) for each need whose true answer is empty: a tool's empty
    answer is an `empty_result` failure to the policy layer (it is how a swallowed error
    reads), so explicit propagation reports it and abstains where it was right."""
    return [
        (
            ("task", "needs", i),
            f"need {need.id!r}: its true answer is empty ({json.dumps(truths[need.id])}); an "
            "empty answer is an `empty_result` failure to the policy layer, so an explicit "
            "agent reports it and abstains where it was right (no success), and an implicit "
            "one states it (success)",
        )
        for i, need in enumerate(scenario.task.needs)
        if truths.get(need.id) in ([], {}, None, "")
    ]


def answer(
    scenario: Scenario, catalog: ToolCatalog, need: NeedSpec, args: Mapping[str, object]
) -> JsonValue:
    """What `need`'s tool answers, fault-free, for `args` (None when it finds nothing)."""
    spec = scenario.tools[need.tool]
    if spec.kind in ("metric_store", "paper_search", "batch_fetch", "report_sink"):
        known: JsonValue = to_jsonable_python(truth(scenario.world, scenario.tools, need))
        return known
    if spec.kind == "mcp":
        return mcp_answer(scenario, catalog.mcp[need.tool], need, args)
    try:
        given = catalog.models[need.tool].model_validate(dict(args)).model_dump()
    except ValidationError:
        return None  # the right arguments are not valid ones: nothing to find
    try:
        if spec.kind == "python":
            return _python_answer(scenario, catalog, need, given)
        assert spec.table is not None
        table = scenario.world.tables[spec.table]
        if spec.kind == "search":
            return records.search(spec, table, given)
        value, _ = records.lookup(spec, table, given)
        return value
    except (ToolException, LookupError):
        return None


def _python_answer(
    scenario: Scenario, catalog: ToolCatalog, need: NeedSpec, given: dict[str, object]
) -> JsonValue:
    """A Python tool's own answer. A tool with randomness of its own (it takes a
    ToolContext) may fail a call as it fails for the agents: the first of TRUTH_TRIES
    calls that answers is its fault-free answer. One that never answers (or a plain
    tool that raises) has no truth to score against: the need must state it."""
    tool = catalog.python[need.tool]
    tries = TRUTH_TRIES if tool.context_param else 1
    error: Exception | None = None
    for call in range(tries):
        context = ToolContext.of(scenario.seed, TRUTH_TRIAL, "", need.tool, call)
        try:
            with ThreadPoolExecutor(1) as pool:  # callable from inside a running loop
                raw = pool.submit(asyncio.run, tool.call(given, TRUTH_TIMEOUT_S, context)).result()
            return json_answer(need.tool, raw)
        except (ToolException, LookupError):
            raise
        except Exception as exc:  # the user's code failed: say so in one line, below
            error = exc
    index = scenario.task.needs.index(need)
    text = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    message = (
        f"the ground truth of need {need.id!r} could not be computed: {need.tool} raised "
        f"{text} in {tries} call(s) with the need's arguments; state the answer with `expect:`"
    )
    raise ScenarioError("<scenario>", [Problem(f"task.needs.{index}", None, None, message)])
